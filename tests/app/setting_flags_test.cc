// The CLI names its flag for a library error or warning about a setting
// (cli/setting_flags.h): "error: --tree: <the library's words>" when the
// command that ran has that flag, the library's words alone when it has not;
// and every flag of the table is one a command really has.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <cstring>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_cli.h"
#include "cli/setting_flags.h"
#include "cli_util.h"
#include "core/setting.h"

namespace mtp::test {
namespace {

struct SettingRun {
  int status;
  std::string err;
};

// `body` as the callback of subcommand "with" (which has --tree and
// --threads) or "without" (no flags), run through run_cli.
SettingRun run_setting_cli(const std::function<void()>& body, const char* command) {
  CLI::App app{"test"};
  app.require_subcommand(1);
  std::string tree;
  int threads = 0;
  CLI::App* with = app.add_subcommand("with", "has the flags");
  with->add_option("--tree", tree, "a tree shape");
  with->add_option("--threads", threads, "threads");
  with->callback(body);
  app.add_subcommand("without", "has none")->callback(body);
  std::vector<std::string> storage = {"prog", command};
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  testing::internal::CaptureStderr();
  const int rc = cli::run_cli(app, int(argv.size()), argv.data());
  return {rc, testing::internal::GetCapturedStderr()};
}

TEST(SettingFlags, AnErrorAboutASettingNamesTheCommandsFlag) {
  const auto bad_tree = [] { fail_setting<InputError>("tree", "a tree shape {:?}: bad", "2,0"); };
  SettingRun r = run_setting_cli(bad_tree, "with");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "error: --tree: a tree shape \"2,0\": bad\n");
  r = run_setting_cli(bad_tree, "without");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "error: a tree shape \"2,0\": bad\n");
  // An error about no setting, or one the table does not know: as it is.
  r = run_setting_cli([] { fail<ConfigError>("plain"); }, "with");
  EXPECT_EQ(r.err, "error: plain\n");
  r = run_setting_cli([] { fail_setting<ConfigError>("no_such_setting", "odd"); }, "with");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "error: odd\n");
}

TEST(SettingFlags, AWarningAboutASettingNamesTheFlagWhileTheCliRuns) {
  const auto warn = [] { warn_setting("threads", "a thread count of 99 is a lot"); };
  SettingRun r = run_setting_cli(warn, "with");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "warning: --threads: a thread count of 99 is a lot\n");
  r = run_setting_cli(warn, "without");
  EXPECT_EQ(r.err, "warning: a thread count of 99 is a lot\n");
  // After run_cli the library's own sink is back.
  testing::internal::CaptureStderr();
  warn();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "warning: a thread count of 99 is a lot\n");
}

// A table entry whose flag no command has would never name anything: each
// flag is in the --help of a command of one of the two executables.
TEST(SettingFlags, EveryFlagOfTheTableIsACommandsFlag) {
#ifndef MTPSPEC_HAVE_TRAIN_BIN
  GTEST_SKIP() << "no mtpspec-train in this build: its flags cannot be listed";
#else
  std::set<std::string> flags;  // the first word of each option line: "  -m,--model TEXT ..."
  const auto add = [&](const CliResult& h, const std::string& c) {
    ASSERT_EQ(h.status, 0) << c;
    std::istringstream lines(h.out);
    std::string line;
    while (std::getline(lines, line)) {
      std::string word;
      std::istringstream(line) >> word;
      if (word.size() > 3 && word[0] == '-' && word[1] != '-' && word[2] == ',') {
        word = word.substr(3);
      }
      if (word.rfind("--", 0) == 0) flags.insert(word);
    }
  };
  for (const char* c : {"generate", "bench", "bench-decode", "bench-kernels", "precompute",
                        "drift", "init-drafter", "demo", "pretrain", "widen", "serve",
                        "tokenize"}) {
    add(run_cli(std::string(c) + " --help"), c);
  }
  // train has every flag of mtpspec-train's commands in the table (its start
  // loads libtorch: about a second).
  add(run_cli_binary(MTPSPEC_TRAIN_BIN_PATH, "train --help"), "train");
  add(run_cli_binary(MTPSPEC_TRAIN_BIN_PATH, "train-assistant --help"), "train-assistant");
  ASSERT_TRUE(flags.count("--model")) << testing::PrintToString(flags);
  for (const auto& [setting, flag] : cli::kSettingFlags) {
    EXPECT_TRUE(flags.count(flag)) << setting << " -> " << flag;
  }
#endif
}

}  // namespace
}  // namespace mtp::test
