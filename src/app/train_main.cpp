// mtpspec-train: the libtorch part of mtpspec (train, export, parity). Users
// run it through `mtpspec train|export|parity`, which exec this binary (see
// app/train_forward.h for why it is a separate executable).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>

#include "app/commands.h"
#include "app/run_cli.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"mtpspec-train: drafter training with libtorch (run as `mtpspec train|export|parity`)"};
  app.require_subcommand(1);
  mtp::app::add_train(app);
  mtp::app::add_export(app);
  mtp::app::add_parity(app);
  mtp::app::add_pretrain_model(app);
  return mtp::app::run_cli(app, argc, argv);
}
