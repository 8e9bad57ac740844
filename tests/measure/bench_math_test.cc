// bench's arithmetic against hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "measure/bench_math.h"

namespace mtp::speculative {
namespace {

TEST(BenchMath, ExpectedTokensPerCycle) {
  EXPECT_DOUBLE_EQ(expected_tokens_per_cycle({}), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_cycle({0.5}), 1.5);
  // 1 + 0.8 + 0.8·0.5 = 2.2
  EXPECT_DOUBLE_EQ(expected_tokens_per_cycle({0.8, 0.5}), 2.2);
  // 1 + 1 + 1 + 1 = 4 with perfect drafts, K = 3
  EXPECT_DOUBLE_EQ(expected_tokens_per_cycle({1, 1, 1}), 4.0);
  // a zero stops the chain
  EXPECT_DOUBLE_EQ(expected_tokens_per_cycle({0.9, 0.0, 0.9}), 1.9);
}

TEST(BenchMath, PredictedSpeedup) {
  // E = 2.2, m(3) = 1.1, drafter 0.2 decode-times: 2.2 / 1.3
  EXPECT_DOUBLE_EQ(predicted_speedup(2.2, 1.1, 0.2), 2.2 / 1.3);
}

TEST(BenchMath, BreakEvenAcceptance) {
  // K = 1: 1 + p = m + c -> p = m + c - 1.
  EXPECT_NEAR(*break_even_acceptance(1, 1.2, 0.1), 0.3, 1e-12);
  // K = 2: 1 + p + p² = 1.75 -> p = 0.5.
  EXPECT_NEAR(*break_even_acceptance(2, 1.5, 0.25), 0.5, 1e-12);
  // The earlier system's phone: verify of 3 cost ~2 decodes plus drafter 0.3, K = 2:
  // 1 + p + p² = 2.3 -> p = (-1 + sqrt(1 + 4·1.3)) / 2.
  EXPECT_NEAR(*break_even_acceptance(2, 2.0, 0.3), (-1 + std::sqrt(6.2)) / 2, 1e-12);
  // Even perfect drafts cannot pay for a cycle costing more than K + 1 decodes.
  EXPECT_FALSE(break_even_acceptance(2, 2.9, 0.2).has_value());
  // A cycle costing no more than a decode breaks even at 0.
  EXPECT_DOUBLE_EQ(*break_even_acceptance(3, 0.9, 0.1), 0.0);
}

TEST(BenchMath, Spread) {
  Spread s = spread({1.0, 3.0, 2.0});
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 3.0);
  EXPECT_DOUBLE_EQ(s.median, 2.0);
  EXPECT_DOUBLE_EQ(s.stdev, 1.0);
}

TEST(BenchMath, CycleCost) {
  // 4 cycles, draft 0.8 s, verify 4.8 s, other 0.4 s, a decode step of 1 s:
  // per cycle 0.2 + 1.2 + 0.1 = 1.5 decodes, other 0.1 / 1.5 of it.
  CycleCost c = cycle_cost(4, 0.8, 4.8, 0.4, 1.0);
  EXPECT_DOUBLE_EQ(c.draft_rel, 0.2);
  EXPECT_DOUBLE_EQ(c.verify_rel, 1.2);
  EXPECT_DOUBLE_EQ(c.other_rel, 0.1);
  EXPECT_DOUBLE_EQ(c.cycle_rel_decode, 1.5);
  EXPECT_DOUBLE_EQ(c.other_fraction, 0.1 / 1.5);
  // Halving the decode step doubles every relative cost, not the fraction.
  CycleCost h = cycle_cost(4, 0.8, 4.8, 0.4, 0.5);
  EXPECT_DOUBLE_EQ(h.cycle_rel_decode, 3.0);
  EXPECT_DOUBLE_EQ(h.other_fraction, c.other_fraction);
  // Nothing measured: zeros, never a division by zero.
  CycleCost z = cycle_cost(0, 0, 0, 0, 1.0);
  EXPECT_EQ(z.cycle_rel_decode, 0.0);
  EXPECT_EQ(z.other_fraction, 0.0);
  EXPECT_EQ(cycle_cost(3, 1, 1, 1, 0.0).cycle_rel_decode, 0.0);
}

}  // namespace
}  // namespace mtp::speculative

namespace mtp::speculative {
namespace {
// Hand-counted: {1 2 1 2 1} has bigrams 12 21 12 21 -> 2 distinct of 4 = 0.5;
// {2 1 3}: 21 13 -> 1.0 on its own (a bigram shared with another sequence is
// not a repetition): mean 0.75. {1} has no bigram and does not count.
TEST(BenchMath, DistinctN) {
  EXPECT_DOUBLE_EQ(distinct_n({{1, 2, 1, 2, 1}}, 2), 0.5);
  EXPECT_DOUBLE_EQ(distinct_n({{1, 2, 1, 2, 1}, {2, 1, 3}}, 2), 0.75);
  EXPECT_DOUBLE_EQ(distinct_n({{1, 2, 1, 2, 1}, {2, 1, 3}, {1}}, 2), 0.75);
  EXPECT_DOUBLE_EQ(distinct_n({{1}, {2}}, 2), 0.0);
  EXPECT_DOUBLE_EQ(distinct_n({{7, 7, 7, 7}}, 1), 0.25);
  EXPECT_DOUBLE_EQ(distinct_n({{1, 2, 3, 4}}, 3), 1.0);
  EXPECT_THROW(distinct_n({{1}}, 0), mtp::InputError);
}
}  // namespace
}  // namespace mtp::speculative
