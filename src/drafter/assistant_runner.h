// One draft step of Gemma 4's assistant (gemma4_assistant.h) for several
// sequences in one call, attending with the target's K/V in place, and its
// teacher-forced replay over a committed sequence. The step's inputs are
// docs/SEMANTICS.md "Gemma 4's assistant":
//
//   x     = pre_projection · [target.embed(token); state]      [hidden]
//   x     = the assistant's layers on x at position pos: queries only, each
//           layer attending with the K/V of the target layer it reads
//           (AssistantConfig::kv_layer), keys [first_key, pos - 1]
//   x̂     = the assistant's final norm of x
//   state'= post_projection · x̂                                [backbone]
//   scores= the head of x̂: the full vocabulary, or the centroid head's
//           top clusters' tokens (every other token -inf)
//
// Step 1 of a cycle: token = the last committed token (position pos = N - 1
// of N committed), state = the target's post-norm hidden at N - 2. Step
// j > 1: token = the step j - 1 draft, state = step j - 1's state', the same
// position and keys. A row depends on its own inputs and its own sequence's
// K/V only (batch-invariant kernels, attention per row), so a sequence's
// drafts do not depend on which others share the call.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "drafter/gemma4_assistant.h"
#include "model/block.h"
#include "model/forward.h"

namespace mtp::drafter {

struct AssistantInput {
  int seq = 0;           // the target cache's sequence whose K/V the row attends with
  int pos = 0;           // the position id (>= 1): the sequence's last committed token's
  int32_t token = 0;     // the token whose target embedding enters
  const float* state = nullptr;  // [backbone]: the target's post-norm hidden, or a state'
};

// One row's token scores: n of them, for token ids[i] (ids null: token i of
// the whole vocabulary; otherwise ascending — the centroid head's selected
// tokens, every other token's score -inf).
struct AssistantScores {
  const int32_t* ids = nullptr;
  const float* logits = nullptr;
  size_t n = 0;
  // The token of entry i.
  int32_t token(size_t i) const { return ids ? ids[i] : int32_t(i); }
};

class AssistantRunner {
 public:
  AssistantRunner(const model::Model& target, const Gemma4Assistant& a);

  // One step for every row: state' into state_out ([rows, backbone]) and the
  // rows' scores (scores(r), valid until the next step). The rows' keys
  // must be held in `kv` (the target's cache): InternalError otherwise.
  void step(std::span<const AssistantInput> rows, const model::KVCache& kv, float* state_out,
            ThreadPool* pool);
  AssistantScores scores(size_t r) const;

  const Gemma4Assistant& assistant() const { return a_; }
  const model::Model& target() const { return m_; }

 private:
  // The attention of every row and head over the target's K/V of `layer`'s
  // kind into s_.att.
  void attend(std::span<const AssistantInput> rows, int layer, const model::KVCache& kv,
              ThreadPool* pool);
  // The centroid head of row r's normed residual x̂ ([hidden]).
  void centroid_head(size_t r, const float* xn, ThreadPool* pool);

  const model::Model& m_;
  const Gemma4Assistant& a_;
  model::Rope rope_;
  model::BlockScratch s_;
  std::vector<model::Row> rows_;
  std::vector<float> in_, x_, cs_global_, cs_local_, xn_, logits_, cl_;
  std::vector<std::vector<int32_t>> ids_;  // [row] selected tokens, ascending (ordered)
  std::vector<std::vector<float>> sel_;    // [row] their logits
  std::vector<std::pair<int32_t, float>> pairs_;
};

// A greedy chain of the assistant for every committed length: chain[i] is
// for N = n0 + i committed tokens of `tokens` (n0 >= 2, N <= tokens.size()),
// its drafts of steps 1..steps (token and the largest score of the row that
// chose it). The target forwards tokens[0 .. size - 2] in one call into a
// cache of its own (positions never overwritten), the assistant then runs
// every N's chain from the capture — the inputs the live drafter must see
// (live ≡ teacher-forced: tests compare bit for bit).
// keep_scores: every draft also keeps its row's scores (ids empty: the
// whole vocabulary), for the reference tests.
struct AssistantDraft {
  int32_t token;
  float max_logit;
  std::vector<int32_t> ids;
  std::vector<float> logits;
};
std::vector<std::vector<AssistantDraft>> assistant_teacher_forced(
    const model::Model& target, const Gemma4Assistant& a, std::span<const int32_t> tokens,
    int n0, int steps, ThreadPool* pool, bool keep_scores = false);

}  // namespace mtp::drafter
