// Shared helpers for the libFuzzer targets (tests/fuzz/fuzz_*.cc).
//
// Every parser takes a path, so each input is written to a file in a
// per-process temp folder first. A typed mtp::Error is the expected outcome
// for malformed input; any other exception escaping, a crash, a sanitizer
// report, a hang (-timeout) or an allocation past -rss_limit_mb is a finding.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace mtp::fuzz {

// A folder unique to this process (libFuzzer may fork workers).
inline const std::string& work_dir() {
  static const std::string dir = [] {
    std::string d = (std::filesystem::temp_directory_path() /
                     ("mtpspec-fuzz-" + std::to_string(::getpid())))
                        .string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes the input to work_dir()/name and returns the path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = work_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// Runs `f`, accepting only typed errors.
template <class F>
void expect_typed(F&& f) {
  try {
    f();
  } catch (const mtp::Error&) {
    // the contract: malformed input is a typed error
  }
  // Anything else propagates: libFuzzer reports an uncaught exception as a crash.
}

}  // namespace mtp::fuzz
