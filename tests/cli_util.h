// Runs the mtpspec binary as a user would and captures its output.
#pragma once
#include <string>

namespace mtp::test {

struct CliResult {
  int status = -1;     // exit status
  std::string out;     // stdout
  std::string err;     // stderr
};

// args are appended to the binary path verbatim (shell syntax; quote yourself).
CliResult run_cli(const std::string& args);
// The same for another executable (e.g. bin/mtpspec-train).
CliResult run_cli_binary(const std::string& binary, const std::string& args);

// Single-quotes a string for the shell.
std::string shell_quote(const std::string& s);

}  // namespace mtp::test
