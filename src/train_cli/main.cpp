// mtpspec-train: the libtorch part of mtpspec (train, export, parity,
// pretrain-model). Users run it through `mtpspec train|export|parity|pretrain`,
// which exec this binary (app/train_forward.h says why it is separate). Exit
// statuses: cli/run_cli.h.
#include <CLI/CLI.hpp>

#include "cli/run_cli.h"
#include "train_cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"mtpspec-train: drafter training with libtorch (run as `mtpspec train|export|parity`)"};
  app.require_subcommand(1);
  app.footer(mtp::cli::kExitStatusHelp);
  mtp::train_cli::add_train(app);
  mtp::train_cli::add_export(app);
  mtp::train_cli::add_parity(app);
  mtp::train_cli::add_pretrain_model(app);
  mtp::train_cli::add_train_assistant(app);
  mtp::train_cli::add_train_native_head(app);
  mtp::cli::show_defaults(app);
  return mtp::cli::run_cli(app, argc, argv);
}
