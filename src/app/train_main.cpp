// mtpspec-train: the libtorch part of mtpspec (train, export, parity). Users
// run it through `mtpspec train|export|parity`, which exec this binary (see
// app/train_forward.h for why it is a separate executable).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>

#include "app/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"mtpspec-train: drafter training with libtorch (run as `mtpspec train|export|parity`)"};
  app.require_subcommand(1);
  mtp::app::add_train(app);
  mtp::app::add_export(app);
  mtp::app::add_parity(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const mtp::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "internal error: {}\n", e.what());
    return 3;
  }
  return 0;
}
