// The exit-status contract shared by both executables (mtpspec and
// mtpspec-train): header-only, because mtpspec-train cannot link the app layer
// (libtorch's protobuf clashes with libsentencepiece's).
//   0 ok; CLI11's own code for bad flags; 2 mtp::Error (a clear message about
//   the input); 3 anything else (an internal error).
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <exception>

#include "core/error.h"

namespace mtp::app {

inline int run_cli(CLI::App& app, int argc, char** argv) {
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

}  // namespace mtp::app
