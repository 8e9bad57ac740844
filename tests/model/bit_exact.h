// The bit-exactness property check, shared by the tests of every architecture.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "model/forward.h"

namespace mtp::test {

// Runs random token sequences through `m` as (1) one-token forwards and (2)
// calls of random sizes q in 2..16, with two sequences interleaved in one call,
// rollbacks (truncate) and replays of other tokens; expects every row's logits
// and capture hidden to be bitwise equal to the one-token reference.
void check_bit_exact(const model::Model& m, int threads, unsigned seed, int n_tokens);

// A test parameterised by SIMD target: pins the kernels to it for one test,
// and lets matmul split even small test models' products over 2 threads (by
// default it keeps small products on one thread).
class SimdTargetTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::set_simd_target(GetParam());
    prev_ = kernels::detail::set_parallel_min_work(0);
  }
  void TearDown() override {
    kernels::set_simd_target("");
    kernels::detail::set_parallel_min_work(prev_);
  }
  size_t prev_ = 0;
};

}  // namespace mtp::test
