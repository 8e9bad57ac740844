// The exit-status contract of both executables (mtpspec and mtpspec-train),
// header-only so each entry links it without the other's layers:
//   0  success (also --help and --version);
//   2  a user error: a flag that does not parse or is out of range (CLI11's own
//      codes 105-109 and every other parse error are mapped to 2), a bad or
//      missing file, bad input — an mtp::Error, whose message names the file,
//      field and value (after the flag of the setting it is about, if any:
//      cli/setting_flags.h);
//   4  an internal error: a violated invariant (MTP_CHECK: "file:line: check
//      ... failed ... (this is a bug in mtpspec)") or an exception nobody
//      expected (std::bad_alloc, a library's own exception).
// Nothing else (a subcommand that reports a failed check, e.g. a parity gate,
// throws an mtp::Error and exits 2).
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <system_error>

#include "cli/checks.h"
#include "cli/setting_flags.h"
#include "core/error.h"

namespace mtp::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUserError = 2;
inline constexpr int kExitInternalError = 4;

// For --help footers and the README.
inline constexpr const char* kExitStatusHelp =
    "Exit status: 0 success; 2 a user error (bad flag, file or input: the message names it); "
    "4 an internal error (a bug: please report the message).\n";

// Every option that takes a value shows its default in --help ("--batch
// INT:> 0=8"), in every subcommand: called once by each entry after all
// commands are declared, so no flag can forget it. Switches (no value) are
// left alone: "--resume{false}" says nothing a user needs.
inline void show_defaults(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_size() != 0 && o->get_default_str().empty()) o->capture_default_str();
  }
  for (CLI::App* sub : app.get_subcommands({})) show_defaults(*sub);
}

// A comma-separated value with an empty item ("--temps 0,,1", "--threads 1,")
// is refused: CLI11 drops empty items, so the typo would silently run a
// different list than the one written. Checked on the raw arguments (the
// parsed results no longer show it), for the options given a delimiter, in
// the subcommand the argument belongs to.
inline void refuse_empty_list_items(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      for (CLI::App* sub : at->get_subcommands({})) {
        if (sub->check_name(arg)) at = sub;
      }
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const CLI::Option* o = nullptr;
    for (const CLI::Option* cand : at->get_options()) {
      if (cand->check_name(name)) o = cand;
    }
    if (!o || o->get_delimiter() == '\0') continue;
    const char* value = eq != std::string::npos ? argv[i] + eq + 1 : i + 1 < argc ? argv[i + 1] : "";
    const std::string v = value, d(1, o->get_delimiter());
    if (v.find(d + d) != std::string::npos || (!v.empty() && (v.front() == d[0] || v.back() == d[0]))) {
      throw mtp::InputError(fmt::format("{} '{}': an empty item in the '{}'-separated list", name, v, d));
    }
  }
}

namespace detail {
// Writes to stderr without throwing (fmt::print throws when the write fails:
// an unwritable stderr turned a plain user error into an abort, exit 134).
inline void say(const std::string& s) noexcept {
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}
// The standard stream a write failed on ("" when none): stdout is flushed
// here, so output still buffered is checked too.
inline std::string failed_stream(int& err) {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    err = errno;
    return "standard output";
  }
  if (std::ferror(stderr)) {
    err = errno;
    return "standard error";
  }
  return "";
}
}  // namespace detail

// Every write to stdout and stderr is checked: a command whose output could
// not be written (stdout on /dev/full, a file-size limit, stderr unwritable)
// exits 2, with a message where one can still be written.
inline int run_cli(CLI::App& app, int argc, char** argv) {
  // A file-size limit (RLIMIT_FSIZE) must end a write with EFBIG — a clear
  // error naming the file, and no partial file — not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  const FlagWarnings warnings(app);
  int status = kExitOk;
  std::string message;
  try {
    strict_numbers(app);
    refuse_empty_list_items(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help / --version are "errors" with code 0 in CLI11; it prints them.
    const int code = app.exit(e);
    status = code == 0 ? kExitOk : kExitUserError;
  } catch (const mtp::Error& e) {
    status = kExitUserError;
    message = fmt::format("error: {}{}\n", flag_prefix(app, e), e.what());
  } catch (const mtp::InternalError& e) {
    status = kExitInternalError;
    message = fmt::format("internal error: {}\n", e.what());
  } catch (const std::system_error& e) {
    // fmt::print throws this when a write to stdout or stderr fails.
    int err = 0;
    const std::string stream = detail::failed_stream(err);
    status = stream.empty() ? kExitInternalError : kExitUserError;
    message = stream.empty()
                  ? fmt::format("internal error: {} (this is a bug in mtpspec)\n", e.what())
                  : fmt::format("error: cannot write to {}: {}\n", stream, e.what());
  } catch (const std::exception& e) {
    status = kExitInternalError;
    message = fmt::format("internal error: {} (this is a bug in mtpspec)\n", e.what());
  }
  int err = 0;
  const std::string stream = detail::failed_stream(err);
  if (!stream.empty() && status == kExitOk) {
    status = kExitUserError;
    message = fmt::format("error: cannot write to {}{}{}\n", stream, err ? ": " : "",
                          err ? std::strerror(err) : "");
  }
  if (!message.empty()) detail::say(message);
  return status;
}

}  // namespace mtp::cli
