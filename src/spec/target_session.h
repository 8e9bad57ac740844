// The target's side of one generation: a one-sequence KV cache plus the capture
// hidden of every forwarded position (the speculative engine's drafter reads it
// from here — invariant 2: the same rows the forward returned, nothing else).
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "model/forward.h"
#include "spec/spec_loop.h"

namespace mtp::spec {

class TargetSession {
 public:
  TargetSession(const model::Model& m, int ctx, ThreadPool* pool);

  const model::Model& model() const { return m_; }
  ThreadPool* pool() const { return pool_; }
  int ctx() const { return kv_.ctx(); }
  int forwarded() const { return kv_.length(0); }

  // Forwards tokens at the next positions in calls of at most q_max rows;
  // writes the last row's logits to last_logits ([vocab]) when not null.
  void prefill(std::span<const int32_t> tokens, float* last_logits);
  // Forwards tokens (at most q_max) in ONE call; logits [n, vocab] for every row.
  void forward(std::span<const int32_t> tokens, float* logits);
  // Rolls back to n forwarded positions.
  void truncate(int n) { kv_.truncate(0, n); }
  // Capture hidden of position pos (< forwarded()), [d].
  const float* hidden(int pos) const { return hidden_.data() + size_t(pos) * m_.config().d_model; }

 private:
  const model::Model& m_;
  ThreadPool* pool_;
  model::KVCache kv_;
  std::vector<float> hidden_;  // [ctx, d]
  std::vector<model::Row> rows_;
};

// Greedy verification against the target: choices are the target's argmax
// (ties to the lowest index) after each prefix. Chains only for now (a tree
// needs tree attention and per-node KV slots: the draft-tree work).
class GreedyVerifier : public Verifier {
 public:
  explicit GreedyVerifier(TargetSession& s) : s_(s) {}
  void verify(std::span<const int32_t> committed, const DraftTree& tree,
              std::vector<int32_t>& choices) override;
  void commit(std::span<const int32_t> committed, std::span<const int32_t> accepted) override;

  // Sees every verify call's logits: rows [n, vocab], row j chose the token at
  // sequence index first_index + j. (drift compares them with decode rows.)
  using Observer = std::function<void(size_t first_index, const float* logits, size_t n)>;
  void set_observer(Observer o) { observer_ = std::move(o); }
  // Diagnostic fault for `drift --inject-fault stale-kv`: commit() keeps the
  // rejected drafts' K/V instead of rolling back, as the earlier system did.
  // Never set outside the drift harness.
  void inject_stale_kv_fault() { stale_kv_fault_ = true; }

 private:
  TargetSession& s_;
  Observer observer_;
  bool stale_kv_fault_ = false;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
};

}  // namespace mtp::spec
