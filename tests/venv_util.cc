#include "venv_util.h"

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_util.h"
#include "test_util.h"

namespace mtp::test {

std::string venv_dir(const std::string& name) {
  std::string var = "MTPSPEC_" + name + "_VENV";
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
  if (const char* v = std::getenv(var.c_str()); v && *v) return v;
  return std::string(MTPSPEC_VENV_DIR) + "/" + name;
}

std::string venv_python(const std::string& name) {
  const std::string py = venv_dir(name) + "/bin/python";
  return std::filesystem::exists(py) ? py : "";
}

std::string real_model_path(const std::string& file_name) {
  const std::string p = venv_dir("real") + "/models/" + file_name;
  return std::filesystem::exists(p) ? p : "";
}

int run_python(const std::string& python, const std::string& args, std::string* out) {
  const std::string err_path = temp_dir("py") + "/stderr";
  const std::string cmd = shell_quote(python) + " " + args + " 2>" + shell_quote(err_path);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int st = pclose(p);
  const int status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (status != 0) {
    std::ifstream e(err_path);
    std::stringstream ss;
    ss << e.rdbuf();
    text += ss.str();
  }
  if (out) *out = std::move(text);
  return status;
}

}  // namespace mtp::test
