#include "cli_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace mtp::test {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CliResult run_cli(const std::string& args) { return run_cli_binary(MTPSPEC_BIN, args); }

CliResult run_cli_binary(const std::string& binary, const std::string& args) {
  std::string dir = temp_dir("cli");
  std::string err_path = dir + "/stderr";
  std::string cmd = shell_quote(binary) + " " + args + " 2>" + shell_quote(err_path);
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

}  // namespace mtp::test
