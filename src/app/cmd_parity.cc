// `mtpspec parity`: the run's libtorch modules vs the engine's modules loaded
// from a drafter file (train/parity.h). Exits non-zero when the gate fails.
// Compiled twice: into bin/mtpspec-train (MTPSPEC_HAVE_TORCH, the real command)
// and into the main binary (a forwarder to it, app/train_forward.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>

#include "app/commands.h"
#include "app/train_forward.h"
#include "core/error.h"
#include "train/export.h"

namespace mtp::app {

#ifndef MTPSPEC_HAVE_TORCH
// The main binary: pass everything to bin/mtpspec-train (see train_forward.h).
void add_parity(CLI::App& root) {
  add_train_forwarder(root, "parity", "Check that the engine's drafter modules reproduce the trained (libtorch) ones");
}
#else
void add_parity(CLI::App& root) {
  auto o = std::make_shared<train::RunParityOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand(
      "parity", "Check that the engine's drafter modules reproduce the trained (libtorch) ones");
  cmd->add_option("-m,--model", o->model, "Target model")->required();
  cmd->add_option("--drafter", o->drafter, "Drafter file (from `mtpspec export`)")->required();
  cmd->add_option("--run", o->run_dir, "Run folder the drafter was exported from")->required();
  cmd->add_option("--shards", o->shards_dir,
                  "Shards for inputs from real positions (default: the run's, when present)");
  cmd->add_flag("--json", *json, "Print the report as JSON");
  cmd->add_option("--threads", o->threads, "Threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
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
#endif  // MTPSPEC_HAVE_TORCH

}  // namespace mtp::app
