// The target's side of one generation: a one-sequence KV cache plus the capture
// hidden of every forwarded position (the speculative engine's drafter reads it
// from here — invariant 2: the same rows the forward returned, nothing else).
#pragma once
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "model/forward.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::speculative {

class TargetSession {
 public:
  // Owns a one-sequence cache of ctx positions.
  TargetSession(const model::Model& m, int ctx, ThreadPool* pool);
  // A view of sequence `seq` of a shared multi-sequence cache (the scheduler's,
  // scheduler.h): the owner of the cache may forward this sequence's rows
  // itself, together with other sequences' rows, and store their capture
  // hidden through hidden_row(); prefill/forward work as with an own cache.
  TargetSession(const model::Model& m, model::KVCache& shared, int seq, ThreadPool* pool);
  TargetSession(const TargetSession&) = delete;
  TargetSession& operator=(const TargetSession&) = delete;

  const model::Model& model() const { return m_; }
  ThreadPool* pool() const { return pool_; }
  int ctx() const { return kv_->ctx(); }
  int q_max() const { return kv_->q_max(); }  // rows of one forward call
  int seq() const { return seq_; }
  int forwarded() const { return kv_->length(seq_); }
  // The cache this session's positions live in (its own, or the shared one:
  // sequence seq()), read-only: Gemma 4's assistant attends with the
  // target's K/V in place (sources/assistant_source.h).
  const model::KVCache& kv() const { return *kv_; }

  // Forwards tokens at the next positions in calls of at most q_max rows;
  // writes the last row's logits to last_logits ([vocab]) when not null.
  void prefill(std::span<const int32_t> tokens, float* last_logits);
  // Forwards tokens (at most q_max) in ONE call; logits [n, vocab] for every row.
  void forward(std::span<const int32_t> tokens, float* logits);
  // Forwards `root` at the next position and the nodes of `tree` as tree rows
  // continuing it (model/kv_cache.h "Tree rows"), in ONE call: logits
  // [1 + tree.size(), vocab], row 0 the root's, row i + 1 node i's. The root
  // becomes a forwarded position; the nodes are held until commit_tree.
  void forward_tree(int32_t root, std::span<const int32_t> tree_tokens,
                    std::span<const int32_t> tree_parents, float* logits);
  // Keeps the held tree's path `path` (root's child down) as the next
  // forwarded positions — K/V and capture hidden moved into place, bit copies —
  // and drops the other nodes.
  void commit_tree(std::span<const int32_t> path);
  // For the owner of a shared cache that forwarded a tree itself ([root,
  // nodes...] as forward_tree lays them out, in a call with other sequences'
  // rows): the capture hidden of those rows ([1 + nodes, d]); the root becomes
  // a forwarded position and the nodes are held until commit_tree.
  void hold_tree(const float* hidden_rows, size_t rows);
  // Rolls back to n forwarded positions.
  void truncate(int n) { kv_->truncate(seq_, n); }
  // Capture hidden of position pos (< forwarded()), [d].
  const float* hidden(int pos) const { return hidden_.data() + size_t(pos) * m_.config().d_model; }
  // The capture hidden of positions [pos, pos + n) after the target's final
  // norm, [n, d]: the bits its lm_head reads (Capture::PostNormHidden).
  void post_norm_hidden(int pos, size_t n, float* out) const { m_.final_norm(hidden(pos), n, out); }
  // Where the capture hidden of position pos (< ctx) is stored, [d]: for the
  // owner of a shared cache that forwarded the row itself.
  float* hidden_row(int pos) { return hidden_.data() + size_t(pos) * m_.config().d_model; }

 private:
  const model::Model& m_;
  ThreadPool* pool_;
  std::optional<model::KVCache> own_kv_;
  model::KVCache* kv_;
  int seq_ = 0;
  std::vector<float> hidden_;       // [ctx, d]
  std::vector<float> tree_hidden_;  // [1 + nodes, d] of the last forward_tree
  std::vector<model::Row> rows_;
};

// Verification against the target. choices[j] is the target's token at
// sequence position N + j (N = committed tokens) after committed + drafts
// d_0..d_{j-1}:
//  - temperature 0: the argmax (ties to the lowest index);
//  - coupled sampling: the keyed Gumbel-max of sampler.h at position N + j —
//    exactly the token plain sampling draws there, so a draft is accepted when
//    it equals it and the output is plain sampling's;
//  - rejection sampling: for a draft d_j sampled from q_j (tree.dist; a
//    proposer without one drafts deterministically: q_j = the point mass), d_j
//    itself when u < min(1, p_j(d_j) / q_j(d_j)) (u keyed by position and
//    token), else a sample of norm(max(0, p_j − q_j)); after the last draft a
//    sample of p (the bonus token).
// Trees (greedy and coupled only): node i's choice is the target's token after
// committed + the path to node i, at position N + depth(i); the root and the
// nodes are forwarded in one call with tree attention, and commit keeps the
// accepted path (TargetSession::commit_tree). Rejection sampling verifies
// chains only (multi-draft rejection is not implemented; trees are refused).
class TargetVerifier : public Verifier {
 public:
  explicit TargetVerifier(TargetSession& s, const SamplerOptions& sampling = {},
                          SpecSampling mode = SpecSampling::Coupled)
      : s_(s), sampler_(sampling), mode_(mode) {}
  void verify(std::span<const int32_t> committed, const DraftTree& tree,
              std::vector<int32_t>& choices) override;
  // verify() without the forward, for a caller that forwarded the rows
  // [committed.back(), tree tokens...] itself (the scheduler, in one call with
  // other sequences' rows): logits [tree.size() + 1, vocab] of those rows.
  void choose_all(std::span<const int32_t> committed, const DraftTree& tree, const float* logits,
                  std::vector<int32_t>& choices);
  void commit(std::span<const int32_t> committed, std::span<const int32_t> accepted) override;

  // Sees every verify call's logits: rows [n, vocab], row j chose the token at
  // sequence index first_index + j. (drift compares them with decode rows.)
  using Observer = std::function<void(size_t first_index, const float* logits, size_t n)>;
  void set_observer(Observer o) { observer_ = std::move(o); }
  // Diagnostic fault for `drift --inject-fault stale-kv`: commit() keeps the
  // rejected drafts' K/V instead of rolling back, as the reference story's
  // system did (shared/seed). Never set outside the drift harness.
  void inject_stale_kv_fault() { stale_kv_fault_ = true; }

  // Deliberately broken acceptance rules, for the distribution tests only
  // (each must make them fail): accept every draft without the p/q test;
  // on rejection resample from p instead of the residual; accept a draft that
  // is only the target's second choice.
  enum class Fault { None, AcceptWithoutTest, ResampleFromP, AcceptSecondChoice };
  void inject_fault(Fault f) { fault_ = f; }

 private:
  // The choice at row j for draft `draft` (-1: the bonus row).
  int32_t choose(const float* row, int64_t pos, int32_t draft, const TokenDist* q);

  TargetSession& s_;
  Sampler sampler_;
  SpecSampling mode_;
  Observer observer_;
  bool stale_kv_fault_ = false;
  Fault fault_ = Fault::None;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  TokenDist p_, residual_;
  bool tree_held_ = false;  // the last verify forwarded a tree (commit keeps its path)
  int tree_base_ = 0;       // committed tokens at that verify
};

}  // namespace mtp::speculative
