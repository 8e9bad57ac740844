// The arithmetic of speculative decoding (docs/INVARIANTS.md "Measuring"):
//   E[tokens/cycle] = 1 + a0 + a0·a1 + … + a0·…·a(K-1)
//     with a_k = live acceptance at position k (accepted / reached);
//   cost of a cycle = m(K+1) + c decode-times, m(q) the verify multiplier and
//     c the drafter's cost per cycle (catch-up included) relative to a decode;
//   predicted speedup = E / (m(K+1) + c);
//   break-even acceptance p*: the acceptance, equal at every position, at which
//     1 + p + … + p^K = m(K+1) + c (null when even p = 1 cannot pay for a cycle);
//   measured cycle cost: the loop's wall time per cycle, split into draft
//     (proposer, catch-up included) / verify (target forward and commit) /
//     other (accept and emit), each relative to one plain decode step.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace mtp::speculative {

double expected_tokens_per_cycle(const std::vector<double>& acceptance);
double predicted_speedup(double expected_tokens, double verify_multiplier, double drafter_cost);
std::optional<double> break_even_acceptance(int k, double verify_multiplier, double drafter_cost);

struct Spread {
  double min = 0, max = 0, stdev = 0, median = 0;
};
Spread spread(std::vector<double> v);

struct CycleCost {
  double cycle_rel_decode = 0;                      // = draft_rel + verify_rel + other_rel
  double draft_rel = 0, verify_rel = 0, other_rel = 0;
  double other_fraction = 0;                        // other_rel / cycle_rel_decode
};
// Per-cycle means of the three times (seconds summed over `cycles` cycles),
// divided by one plain decode step (seconds). All zero when cycles == 0 or
// decode_step_s <= 0.
CycleCost cycle_cost(long cycles, double draft_s, double verify_s, double other_s,
                     double decode_step_s);

// Distinct-n (after Li et al. 2016), per sequence then averaged: the fraction
// of a sequence's n-grams that are distinct, mean over the sequences that have
// at least one n-gram. 1 = nothing repeats within an output; a target stuck in
// a loop scores near 0 — and makes any drafter look good, which is why bench
// prints it beside the acceptance. Per sequence, so that two outputs sharing a
// stock phrase do not count as repetition. 0 when no sequence has an n-gram.
double distinct_n(const std::vector<std::vector<int32_t>>& seqs, int n);

}  // namespace mtp::speculative
