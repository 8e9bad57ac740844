// mtpspec: one binary, subcommands (see `mtpspec --help`).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>

#include "app/commands.h"
#include "cli/run_cli.h"

int main(int argc, char** argv) {
  CLI::App app{
      "mtpspec: lossless speculative decoding on the CPU with a multi-token-prediction "
      "drafter trained against your exact model."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mtpspec 0.1.0");
  app.footer(mtp::cli::kExitStatusHelp);
  mtp::app::add_generate(app);
  mtp::app::add_tokenize(app);
  mtp::app::add_bench_kernels(app);
  mtp::app::add_init_drafter(app);
  mtp::app::add_precompute(app);
  mtp::app::add_drift(app);
  mtp::app::add_bench_decode(app);
  mtp::app::add_bench(app);
  mtp::app::add_demo(app);
  mtp::app::add_widen(app);
  mtp::app::add_serve(app);
  mtp::app::add_train_forwarders(app);
  mtp::app::add_pretrain(app);
  mtp::cli::show_defaults(app);
  return mtp::cli::run_cli(app, argc, argv);
}
