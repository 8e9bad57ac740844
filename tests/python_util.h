// The Python interpreter of the tests' reference environment: the one named
// by MTPSPEC_REF_PYTHON, else ../venv-ref/bin/python3 beside the source tree.
// Tests that need PyPI packages (gguf, transformers) skip with a clear message
// when it is absent or lacks them.
#pragma once
#include <string>
#include <vector>

namespace mtp::test {

// The interpreter when it imports every module of `modules`; otherwise "" and
// `why` says what is missing (for GTEST_SKIP).
std::string ref_python(const std::vector<std::string>& modules, std::string* why);

// Runs `python script args...`; returns the exit status, the combined output
// in *output.
int run_python(const std::string& python, const std::string& script,
               const std::vector<std::string>& args, std::string* output);

}  // namespace mtp::test
