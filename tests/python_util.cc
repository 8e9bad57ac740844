#include "python_util.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace mtp::test {

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int run(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::string out;
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string ref_python(const std::vector<std::string>& modules, std::string* why) {
  const char* env = std::getenv("MTPSPEC_REF_PYTHON");
  const std::string py = env && *env ? env
                                     : (fs::path(MTPSPEC_SOURCE_DIR) / ".." / "venv-ref" / "bin" /
                                        "python3").string();
  std::error_code ec;
  if (!fs::exists(py, ec)) {
    if (why) *why = "no reference Python at " + py + " (set MTPSPEC_REF_PYTHON)";
    return "";
  }
  std::string imports;
  for (const auto& m : modules) imports += (imports.empty() ? "import " : ", ") + m;
  std::string out;
  if (run(quote(py) + " -c " + quote(imports), &out) != 0) {
    if (why) *why = py + " cannot '" + imports + "': " + out.substr(0, 300);
    return "";
  }
  return py;
}

int run_python(const std::string& python, const std::string& script,
               const std::vector<std::string>& args, std::string* output) {
  std::string cmd = quote(python) + " " + quote(script);
  for (const auto& a : args) cmd += " " + quote(a);
  return run(cmd, output);
}

}  // namespace mtp::test
