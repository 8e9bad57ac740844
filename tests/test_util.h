// Helpers shared by all test binaries.
#pragma once
#include <gtest/gtest.h>

#include <string>

namespace mtp::test {

// ../shared relative to the source tree (CMake passes the path).
std::string shared_dir();
// Path under shared/, or "" if absent.
std::string shared_path(const std::string& rel);
// A fresh temporary directory, removed at process exit.
std::string temp_dir(const std::string& tag);

}  // namespace mtp::test

// Skips the current test with a clear message when a shared file is absent.
#define MTP_REQUIRE_SHARED(var, rel)                                              \
  std::string var = ::mtp::test::shared_path(rel);                                \
  if (var.empty()) GTEST_SKIP() << "shared data not found: ../shared/" << (rel)   \
                                << " (tests read it from the shared folder)"
