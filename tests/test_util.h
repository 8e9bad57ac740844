// Helpers shared by all test binaries.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <stdexcept>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mtp::test {

// ../shared relative to the source tree (CMake passes the path).
std::string shared_dir();
// Path under shared/, or "" if absent.
std::string shared_path(const std::string& rel);
// A fresh temporary directory, removed at process exit.
std::string temp_dir(const std::string& tag);

// Expects f() to throw T with every `parts` substring in what(); returns
// what() (empty when it did not throw T, which is a test failure).
template <class T, class F>
std::string expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const T& e) {
    for (auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
    }
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  return {};
}

// n values drawn from N(0, scale²) with rng (kernel tests' random weights
// and activations).
std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.f);

// The bits of f (bitwise comparisons print them apart from ±0 and NaN).
uint32_t float_bits(float f);

}  // namespace mtp::test

// Skips the current test with a clear message when a shared file is absent.
#define MTP_REQUIRE_SHARED(var, rel)                                              \
  std::string var = ::mtp::test::shared_path(rel);                                \
  if (var.empty()) GTEST_SKIP() << "shared data not found: ../shared/" << (rel)   \
                                << " (tests read it from the shared folder)"
