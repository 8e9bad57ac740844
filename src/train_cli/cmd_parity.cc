// `mtpspec parity`: the run's libtorch modules vs the engine's modules loaded
// from a drafter file (train/parity.h). Exits non-zero when the gate fails.
// Runs in bin/mtpspec-train; `mtpspec parity` execs it (app/train_forward.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>

#include "cli/checks.h"
#include "cli/train_commands.h"
#include "train_cli/commands.h"
#include "core/error.h"
#include "train/export.h"

namespace mtp::train_cli {

void add_parity(CLI::App& root) {
  auto o = std::make_shared<train::RunParityOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand(
      cli::kParity.name, cli::kParity.help);
  cmd->add_option("-m,--model", o->model, "Target model")->required();
  cmd->add_option("--drafter", o->drafter, "Drafter file (from `mtpspec export`)")->required();
  cmd->add_option("--run", o->run_dir, "Run folder the drafter was exported from")->required();
  cmd->add_option("--shards", o->shards_dir,
                  "Shards for inputs from real positions (default: the run's, when present)");
  cmd->add_flag("--json", *json, "Print the report as JSON");
  cmd->add_option("--threads", o->threads, "Threads (default: physical cores)")
      ->check(cli::NonNegative);
  cmd->callback([o, json] {
    train::ParityReport r = train::parity_for_run(*o);
    if (*json) fmt::print("{}\n", r.to_json().dump(1));
    else fmt::print("{}", r.text());
    if (!r.passed) {
      fail<Error>("parity gate FAILED: the drafter's engine modules disagree with the run's "
                  "trained modules beyond the tolerance");
    }
  });
}

}  // namespace mtp::train_cli
