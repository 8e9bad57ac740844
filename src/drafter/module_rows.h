// THE module-row contract, written once (docs/FORMATS.md "Drafter"):
//
//   For a token sequence tok[0..N-1] and module k (0-based), row t
//   (t = 0 .. N-2-k) has RoPE position t, embeds tok[t+k+1], reads
//   h_{k-1}[t] (h_{-1} = the target's capture hidden at position t; module
//   k-1's output row t otherwise), writes h_k[t], and its logits predict
//   tok[t+k+2].
//
// Rows are forwarded in calls of at most q_max rows (the module's KV cache
// bound). The speculative drafting (speculative/mtp_chains.cc, mtp_tree.cc), teacher forcing
// (drafter/teacher_forced.cc), the parity gate (train/parity.cc) and the
// training step (train/step.cc) all index through these functions, so an
// off-by-one (the reference story's first bug, shared/seed) cannot exist in
// one of them only.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "model/forward.h"

namespace mtp::drafter {

// Index in tok of the token row t of module k embeds.
constexpr int module_input_index(int k, int t) { return t + k + 1; }
// Index in tok of the token row t of module k predicts.
constexpr int module_target_index(int k, int t) { return t + k + 2; }
// Rows of module k whose input token exists in a sequence of n tokens:
// t = 0 .. n-2-k (an empty range when the sequence is too short).
constexpr int module_row_count(int n, int k) { return std::max(0, n - 1 - k); }
// Rows of module k whose target token also exists (what training and accuracy
// score): t = 0 .. n-3-k.
constexpr int module_scored_row_count(int n, int k) { return std::max(0, n - 2 - k); }

// Calls fn(t0, t1) for consecutive chunks [t0, t1) of [begin, end), each at
// most q_max rows.
template <class F>
void for_each_row_chunk(int begin, int end, int q_max, F&& fn) {
  for (int t0 = begin; t0 < end; t0 += q_max) fn(t0, std::min(end, t0 + q_max));
}

// The rows [t0, t1) of module k for sequence `seq`: rows[i] = {seq, t,
// tok_at(t+k+1)} and h_in[i] = h_prev(t) ([t1 - t0, d]), where tok_at(j) is the
// sequence's token j and h_prev(t) returns h_{k-1}[t] ([d]).
// append_module_rows appends them (a call of several sequences' rows).
template <class TokAt, class HPrev>
void append_module_rows(int seq, int k, int t0, int t1, TokAt&& tok_at, HPrev&& h_prev, size_t d,
                        std::vector<model::Row>& rows, std::vector<float>& h_in) {
  const size_t base = h_in.size();
  h_in.resize(base + size_t(std::max(0, t1 - t0)) * d);
  for (int t = t0; t < t1; ++t) {
    rows.push_back({seq, t, tok_at(module_input_index(k, t))});
    std::memcpy(h_in.data() + base + size_t(t - t0) * d, h_prev(t), d * sizeof(float));
  }
}
template <class TokAt, class HPrev>
void gather_module_rows(int seq, int k, int t0, int t1, TokAt&& tok_at, HPrev&& h_prev, size_t d,
                        std::vector<model::Row>& rows, std::vector<float>& h_in) {
  rows.clear();
  h_in.clear();
  append_module_rows(seq, k, t0, t1, tok_at, h_prev, d, rows, h_in);
}
// The same over a whole token sequence.
template <class HPrev>
void gather_module_rows(int seq, int k, int t0, int t1, std::span<const int32_t> tok,
                        HPrev&& h_prev, size_t d, std::vector<model::Row>& rows,
                        std::vector<float>& h_in) {
  gather_module_rows(seq, k, t0, t1, [&](int j) { return tok[size_t(j)]; }, h_prev, d, rows, h_in);
}

}  // namespace mtp::drafter
