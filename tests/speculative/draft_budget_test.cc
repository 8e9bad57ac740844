// The draft-length budget (draft_budget.h): speculation where extra rows are
// cheap, none where they cost a full row each, less as the batch fills, and
// never past the row budget.
#include <gtest/gtest.h>

#include <numeric>

#include "checkpoint_util.h"
#include "spec_fixture.h"
#include "speculative/policy/draft_budget.h"

namespace mtp::speculative {
namespace {

const std::vector<double> kHigh = {0.9, 0.7, 0.5, 0.3};

std::vector<BudgetSeq> seqs(int n, std::vector<double> p = kHigh) {
  return std::vector<BudgetSeq>(size_t(n), BudgetSeq{std::move(p), 0.0});
}

int total(const std::vector<int>& k) { return std::accumulate(k.begin(), k.end(), 0); }

TEST(DraftBudget, CostCurveInterpolatesAndExtends) {
  CostCurve c({{1, 1.0}, {2, 1.2}, {4, 2.0}});
  EXPECT_DOUBLE_EQ(c(1), 1.0);
  EXPECT_DOUBLE_EQ(c(3), 1.6);
  EXPECT_DOUBLE_EQ(c(6), 2.8);  // the last slope, 0.4 per row
  EXPECT_DOUBLE_EQ(c(0), 0.0);
}

// Timed points stay non-decreasing, and a point timed again keeps its lower
// timing: points above it that a noisy timing had raised come back down to
// their own timings (a noisy m(3) = 1.58 had held m(4) at 1.58 for good).
TEST(DraftBudget, ATimedPointTimedAgainKeepsItsLowerTiming) {
  CostCurve c({{1, 1.0}, {2, 1.07}});
  c.add_point(3, 1.58);  // noisy
  c.add_point(4, 1.15);  // raised to 1.58
  EXPECT_DOUBLE_EQ(c.timed(4), 1.58);
  c.lower_point(3, 1.12);
  EXPECT_DOUBLE_EQ(c.timed(3), 1.12);
  EXPECT_DOUBLE_EQ(c.timed(4), 1.15);
  c.lower_point(3, 1.30);  // a slower timing changes nothing
  EXPECT_DOUBLE_EQ(c.timed(3), 1.12);
  c.lower_point(2, 0.9);  // below q = 1's: still non-decreasing
  EXPECT_DOUBLE_EQ(c.timed(2), 1.0);
  EXPECT_THROW(c.lower_point(5, 1.0), std::exception);
}

TEST(DraftBudget, CostCurveFollowsMeasuredForwards) {
  CostCurve c({{1, 1.0}, {8, 1.07}});  // timed at start: flat
  EXPECT_DOUBLE_EQ(c(5), 1.04);
  // Live: decodes as timed, 5-row verifies at 1.6 (the weights now stream
  // faster, the verify's arithmetic does not).
  for (int i = 0; i < 100; ++i) c.observe(1, 1.0), c.observe(5, 1.6);
  EXPECT_NEAR(c(1), 1.0, 1e-9);
  EXPECT_NEAR(c(5), 1.6, 1e-3);
  EXPECT_GT(c(3), c(2));           // between observed q: the ratio interpolates
  EXPECT_GE(c(8), c(5));           // never decreasing
  EXPECT_DOUBLE_EQ(c.timed(5), 1.04);
  // So a single sequence drafts less than the timed curve says it should.
  CostCurve timed({{1, 1.0}, {8, 1.07}});
  const std::vector<double> p = {0.8, 0.6, 0.4, 0.2};
  const int on_timed = total(allocate_drafts(timed, ModuleCost{}, 1, 1, 64, seqs(1, p)));
  const int on_live = total(allocate_drafts(c, ModuleCost{}, 1, 1, 64, seqs(1, p)));
  EXPECT_EQ(on_timed, 4);
  EXPECT_LT(on_live, on_timed);
  // Nonsense timings are ignored.
  c.observe(0, 1.0);
  c.observe(2, -1.0);
  EXPECT_NEAR(c(5), 1.6, 1e-3);
}

TEST(DraftBudget, MemoryBoundDraftsComputeBoundDoesNot) {
  // Memory-bound: a row more costs 2 % of a forward.
  CostCurve flat({{1, 1.0}, {64, 2.26}});
  EXPECT_EQ(allocate_drafts(flat, ModuleCost{0.0, 0.0}, 1, 1, 64, seqs(1)), std::vector<int>({4}));
  // Compute-bound: every row costs a whole forward; P_j < 1 never pays.
  CostCurve linear({{1, 1.0}, {64, 64.0}});
  EXPECT_EQ(allocate_drafts(linear, ModuleCost{0.0, 0.0}, 1, 1, 64, seqs(1)), std::vector<int>({0}));
  // Drafter time counts: a module as dear as the forward stops deep drafts.
  EXPECT_LT(total(allocate_drafts(flat, ModuleCost{1.0, 0.0}, 1, 1, 64, seqs(1))), 4);
  // So does the first draft's catch-up.
  std::vector<BudgetSeq> s = seqs(1);
  s[0].first_s = 5.0;
  EXPECT_EQ(allocate_drafts(flat, ModuleCost{0.0, 0.0}, 1, 1, 64, s), std::vector<int>({0}));
}

TEST(DraftBudget, CatchUpIsChargedItsAmortisedShareOnly) {
  // A catch-up row 0.01 per module, 4 modules, 3 tokens/cycle.
  EXPECT_DOUBLE_EQ(first_draft_seconds(0.01, 4, 2, 3.0), 2 * 0.04);
  EXPECT_DOUBLE_EQ(first_draft_seconds(0.01, 4, 3, 3.0), 3 * 0.04);
  // A long pause (or a whole prompt) costs what one cycle's tokens cost.
  EXPECT_DOUBLE_EQ(first_draft_seconds(0.01, 4, 500, 3.0), 3 * 0.04);
  EXPECT_DOUBLE_EQ(first_draft_seconds(0.01, 4, 1, 3.0), 0.04);
  // So a sequence that has waited 500 steps still drafts on a memory-bound
  // target (a row more: 2 % of a forward), where charging the whole debt
  // would stop it for good.
  CostCurve flat({{1, 1.0}, {64, 2.26}});
  std::vector<BudgetSeq> s = seqs(1);
  s[0].first_s = first_draft_seconds(0.01, 4, 500, 3.0);
  EXPECT_GT(total(allocate_drafts(flat, ModuleCost{0.05, 0.0}, 1, 1, 64, s)), 0);
  s[0].first_s = 500 * 0.04;
  EXPECT_EQ(total(allocate_drafts(flat, ModuleCost{0.05, 0.0}, 1, 1, 64, s)), 0);
}

TEST(DraftBudget, AModuleCallIsPaidOncePerDepthInUse) {
  // A row more: 0.5 % of a forward; a module call 10 %.
  CostCurve flat({{1, 1.0}, {65, 1.32}});
  const ModuleCost module{0.1, 0.0};
  // P_0 = 0.3: one draft alone (Δcost 0.105 for 0.3 tokens) pays at one
  // sequence ...
  const std::vector<double> low = {0.3};
  EXPECT_EQ(total(allocate_drafts(flat, module, 1, 1, 64, seqs(1, low))), 1);
  // ... but not as the only drafter among four (the step emits 4 tokens per
  // 1.015 s: 0.3 tokens for 0.105 s lowers that) ...
  std::vector<BudgetSeq> one_of_four = seqs(4, {});
  one_of_four[0].p = low;
  EXPECT_EQ(total(allocate_drafts(flat, module, 4, 4, 64, one_of_four)), 0);
  // ... while four sequences that share the call all draft (1.2 tokens for
  // 0.12 s): charging the call to each of them (0.42 s) would forbid it.
  EXPECT_EQ(allocate_drafts(flat, module, 4, 4, 64, seqs(4, low)), std::vector<int>(4, 1));
  EXPECT_EQ(total(allocate_drafts(flat, ModuleCost{0.0, 0.1}, 4, 4, 64, seqs(4, low))), 0);
}

TEST(DraftBudget, SpeculationShrinksAsTheBatchFills) {
  CostCurve curve({{1, 1.0}, {8, 1.7}, {64, 7.3}});  // 0.1 per row
  const int one = total(allocate_drafts(curve, ModuleCost{0.0, 0.0}, 1, 1, 256, seqs(1)));
  const int eight = total(allocate_drafts(curve, ModuleCost{0.0, 0.0}, 8, 8, 256, seqs(8)));
  EXPECT_EQ(one, 4);
  EXPECT_LT(eight, 8 * one);
  EXPECT_GT(eight, 0);
  // The most likely drafts go first: no sequence gets depth 2 before every
  // one has depth 1 when they are alike.
  std::vector<int> k = allocate_drafts(curve, ModuleCost{0.0, 0.0}, 8, 8, 256, seqs(8));
  EXPECT_LE(*std::max_element(k.begin(), k.end()) - *std::min_element(k.begin(), k.end()), 1);
  // The row budget is a hard limit.
  CostCurve flat({{1, 1.0}, {64, 1.0}});
  EXPECT_EQ(total(allocate_drafts(flat, ModuleCost{0.0, 0.0}, 8, 8, 11, seqs(8))), 3);
  // Sequences without drafts get none.
  const std::vector<BudgetSeq> mixed = {BudgetSeq{}, BudgetSeq{kHigh, 0}};
  EXPECT_EQ(allocate_drafts(flat, ModuleCost{0.0, 0.0}, 2, 2, 64, mixed), std::vector<int>({0, 4}));
}

TEST(DraftBudget, APromptChunkInTheStepDoesNotMakeDraftsLookCheap) {
  // Compute-bound: every row costs a forward's worth; no draft pays ...
  CostCurve linear({{1, 1.0}, {64, 64.0}});
  EXPECT_EQ(total(allocate_drafts(linear, ModuleCost{}, 1, 1, 64, seqs(1))), 0);
  // ... also when 40 prompt rows share the step (its rate with them counted:
  // 2 tokens per 41 row costs, which a 0.9 draft for one row would beat).
  EXPECT_EQ(total(allocate_drafts(linear, ModuleCost{}, 41, 1, 64, seqs(1))), 0);
  // Memory-bound: drafts pay with or without the prompt rows.
  CostCurve flat({{1, 1.0}, {64, 2.26}});
  EXPECT_EQ(total(allocate_drafts(flat, ModuleCost{}, 41, 1, 64, seqs(1))), 4);
}

TEST(DraftBudget, AcceptanceEstimateFollowsTheCounters) {
  // No data: the prior, non-increasing.
  std::vector<double> p = estimate_accept({}, {}, 3, 0.6);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_DOUBLE_EQ(p[0], 0.6);
  EXPECT_LT(p[2], p[1]);
  // 100 cycles, every draft accepted: near 1; none accepted: near 0.
  const std::vector<double> d = {100, 100, 100}, all = {100, 100, 100}, none = {0, 0, 0};
  for (double x : estimate_accept(d, all, 3)) EXPECT_GT(x, 0.98);
  for (double x : estimate_accept(d, none, 3)) EXPECT_LT(x, 0.02);
}

TEST(DraftBudget, ASequencePricedOutByBadLuckDraftsAgainLater) {
  // A row more costs 45 % of a forward: P_0 = 0.6 (the prior) pays, 0.2 not.
  CostCurve curve({{1, 1.0}, {8, 4.15}});
  AcceptCounters c(1);
  auto drafts = [&] {
    BudgetSeq b{c.estimate(1, 0.6), 0.0};
    return allocate_drafts(curve, ModuleCost{}, 1, 1, 64, {&b, 1})[0];
  };
  EXPECT_EQ(drafts(), 1);
  for (int i = 0; i < 4; ++i) c.step(), c.add(1, 0);  // four rejected drafts
  EXPECT_EQ(drafts(), 0);
  int steps = 0;
  while (drafts() == 0 && steps < 100) c.step(), ++steps;
  // Back near the prior within a few tens of steps, not never.
  EXPECT_GT(steps, 2);
  EXPECT_LT(steps, 30);
  // Plain totals (no forgetting) would stay priced out.
  const std::vector<double> d = {4}, a = {0};
  BudgetSeq plain{estimate_accept(d, a, 1, 0.6), 0.0};
  EXPECT_EQ(allocate_drafts(curve, ModuleCost{}, 1, 1, 64, {&plain, 1})[0], 0);
}

// A free draft (a lookup proposal already made) costs its row alone: with
// module calls too dear for the drafter, the free sequence still drafts, past
// the drafter's depth cap (the cap prices module calls), while the drafter's
// sequence drafts nothing; charged as free, the drafter's sequence would draft.
TEST(DraftBudget, FreeDraftsPayOnlyTheirRows) {
  const CostCurve flat({{1, 1.0}, {64, 1.0}});
  std::vector<BudgetSeq> s = seqs(2, kHigh);
  s[1].p = {0.9, 0.8, 0.7, 0.6, 0.5, 0.4};
  s[1].free = true;
  EXPECT_EQ(allocate_drafts(flat, ModuleCost{10.0, 0.0}, 2, 2, 64, s), (std::vector<int>{0, 6}));
  s[0].free = true;
  EXPECT_EQ(allocate_drafts(flat, ModuleCost{10.0, 0.0}, 2, 2, 64, s), (std::vector<int>{4, 6}));
  // Rows still cost: on a curve where a row costs a decode, nothing pays.
  const CostCurve linear({{1, 1.0}, {2, 2.0}});
  EXPECT_EQ(allocate_drafts(linear, ModuleCost{0.0, 0.0}, 2, 2, 64, s), (std::vector<int>{0, 0}));
}

// A chain's net value: the best length, not the longest; rows and drafting
// cost at the step's rate; nothing when no length pays.
TEST(DraftBudget, ChainNetValueTakesTheBestLength) {
  const CostCurve c({{1, 1.0}, {2, 1.1}, {8, 1.7}});  // 0.1 per extra row
  const std::vector<double> p = {0.9, 0.5, 0.1};
  // rate 1 token/s: +0.9 - 0.1, +0.5 - 0.1, +0.1 - 0.1 -> best at k = 2: 1.2.
  EXPECT_NEAR(chain_net_value(c, 1, 1.0, p, 0, 0), 1.2, 1e-12);
  // A per-draft cost of 0.45 s: k = 1 (0.9 - 0.55 = 0.35) beats k = 2 (1.4 - 1.2).
  EXPECT_NEAR(chain_net_value(c, 1, 1.0, p, 0, 0.45), 0.35, 1e-12);
  // A first cost no length repays.
  EXPECT_EQ(chain_net_value(c, 1, 1.0, p, 5.0, 0), 0.0);
  EXPECT_EQ(chain_net_value(c, 1, 1.0, {}, 0, 0), 0.0);
}

// The timed curve's points: every listed q up to q_max without a stop, and
// q_max itself only when more than a quarter beyond the last (10 after 8 is
// not, 11 is); with a stop, the q up to the first forward costing stop_m
// decodes (a stop no forward can reach times them all, one every forward
// reaches stops at q = 2). One round (reps 0) times the same points.
TEST(DraftBudget, TimedCurveStopsWhereAVerifyCannotPay) {
  const test::Target f =
      test::load_target(test::random_hf_checkpoint("cost-curve", test::RandomSpec{}));
  auto qs = [](const CostCurve& c) {
    std::vector<int> q;
    for (const auto& [x, s] : c.points()) q.push_back(x);
    return q;
  };
  const std::vector<int> all = {1, 2, 3, 4, 6, 8};
  EXPECT_EQ(qs(forward_cost_curve(*f.model, 10, 1, nullptr)), all);
  EXPECT_EQ(qs(forward_cost_curve(*f.model, 10, 0, nullptr)), all);
  EXPECT_EQ(qs(forward_cost_curve(*f.model, 11, 0, nullptr)), (std::vector<int>{1, 2, 3, 4, 6, 8, 11}));
  EXPECT_EQ(qs(forward_cost_curve(*f.model, 10, 1, nullptr, 1e9)), all);
  const CostCurve two = forward_cost_curve(*f.model, 10, 1, nullptr, 1e-9);
  EXPECT_EQ(qs(two), (std::vector<int>{1, 2}));
  // Beyond the last point the curve extends its slope.
  const double s1 = two.timed(1), s2 = two.timed(2);
  EXPECT_NEAR(two.timed(10), s2 + 8 * (s2 - s1), 1e-12 + 1e-9 * s2);
  const CostCurve to8 = forward_cost_curve(*f.model, 10, 0, nullptr);
  EXPECT_NEAR(to8.timed(10), to8.timed(8) + (to8.timed(8) - to8.timed(6)), 1e-12 + 1e-9 * to8.timed(8));
}

}  // namespace
}  // namespace mtp::speculative
