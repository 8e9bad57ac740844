#include "app/train_forward.h"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "app/commands.h"
#include "app/subprocess.h"
#include "cli/train_commands.h"
#include "core/error.h"

namespace mtp::app {

namespace {
// $MTPSPEC_TRAIN_BIN, else mtpspec-train beside this executable.
std::string train_binary() {
  if (const char* e = std::getenv("MTPSPEC_TRAIN_BIN"); e && *e) return e;
  return sibling_executable("mtpspec-train");
}

}  // namespace

void require_train_binary(const std::string& what) {
  const std::string bin = train_binary();
  if (bin.empty() || access(bin.c_str(), X_OK) != 0) {
    fail<ConfigError>("`{}` needs the libtorch part of mtpspec, which this build does not have "
                      "(built without libtorch: '{}' not found). Install libtorch and rebuild "
                      "with -DMTPSPEC_WITH_TORCH=ON", what, bin.empty() ? "mtpspec-train" : bin);
  }
}

[[noreturn]] void exec_train(const std::string& name, const std::vector<std::string>& args) {
  require_train_binary(name);
  const std::string bin = train_binary();
  std::vector<std::string> storage = {bin, name};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  // libgomp busy-waits between parallel regions by default; on a shared or
  // oversubscribed machine that burns most of the time (measured 4x slower at 2
  // threads under load). Sleep instead, unless the user chose a policy.
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  execv(bin.c_str(), argv.data());
  fail<IoError>("cannot run '{}': {}", bin, std::strerror(errno));
}

bool assistant_training(std::vector<std::string>& args) {
  std::vector<std::string> rest;
  std::string arch = "mtp";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--drafter-arch" && i + 1 < args.size()) arch = args[++i];
    else if (args[i].rfind("--drafter-arch=", 0) == 0) arch = args[i].substr(15);
    else rest.push_back(args[i]);
  }
  if (arch != "gemma4-assistant") return false;
  const bool help = std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
                    std::find(rest.begin(), rest.end(), "-h") != rest.end();
  if (!help && !wants_online(rest)) {
    fail<InputError>("--drafter-arch gemma4-assistant trains online only (--online): shards "
                     "hold the target's pre-norm hidden state alone, and the assistant reads "
                     "the post-norm hidden state and the K/V of the target's layers it attends "
                     "with at every position, which only a live forward of the target gives");
  }
  rest.erase(std::remove(rest.begin(), rest.end(), "--online"), rest.end());
  args = rest;
  return true;
}

void add_train_forwarders(CLI::App& root) {
  for (const cli::TrainCommand& c :
       {cli::kTrain, cli::kExport, cli::kParity, cli::kTrainAssistant, cli::kTrainNativeHead}) {
    CLI::App* cmd = root.add_subcommand(c.name, c.help);
    cmd->prefix_command();  // stop parsing: everything after the name is passed on
    cmd->set_help_flag();   // --help too (mtpspec-train documents the flags)
    const std::string name = c.name;
    cmd->callback([cmd, name] {
      std::vector<std::string> args = cmd->remaining();
      std::string target = name;
      if (name == cli::kTrain.name && assistant_training(args)) target = cli::kTrainAssistant.name;
      if (target == cli::kTrain.name && wants_online(args)) {
        args = prepare_online_training(args);
        if (args.empty()) return;  // --jobs-only: nothing to train here
      }
      if (target == cli::kTrainAssistant.name && wants_corpus(args)) {
        args = prepare_online_training(args, OnlineTrainer::Assistant);
        if (args.empty()) return;
      }
      exec_train(target, args);
    });
  }
}

}  // namespace mtp::app
