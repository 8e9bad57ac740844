// The target decoder: ONE forward serves prefill, decode (q = 1), verify
// (q = K + 1) and precompute (rows of many sequences in one call).
//
// Invariant 1 (bit-exact verify): every per-row result — logits and capture
// hidden — is a function of that row's token, position and the K/V of earlier
// positions of its sequence only. Matrix products go through the batch-invariant
// kernels; everything else (norms, RoPE, attention, activations) runs row by row
// with a fixed reduction order. So a q-row call gives the same bits as q
// one-row calls, for any q, thread count, or mix of sequences.
//
// Invariant 2 (one capture point): `hidden` is the residual stream after the last
// decoder layer, before the final norm (docs/SEMANTICS.md). precompute and the
// speculative engine both read it from here.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/block.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/loader.h"

namespace mtp::model {

struct ForwardOut {
  float* logits = nullptr;                // [q, vocab], or null to skip all logits
  const uint8_t* logits_mask = nullptr;   // [q]: compute logits for rows with 1 (null = all)
  float* hidden = nullptr;                // [q, d_model] capture hidden, or null
};

class Model {
 public:
  explicit Model(LoadedModel m);
  ~Model();
  Model(Model&&) noexcept;

  const ModelConfig& config() const { return m_.config; }
  const ModelWeights& weights() const { return m_.weights; }
  const LoadedModel& loaded() const { return m_; }

  // Whether a forward can verify draft trees (tree rows, kv_cache.h): every
  // layer attends over a KV cache whose tree slots hold the branches. A
  // layer with recurrent state (Qwen3.5's Gated DeltaNet) keeps one state per
  // sequence, not one per branch: such a target verifies chains only.
  bool verifies_trees() const { return !m_.config.has_recurrent(); }
  // A KV cache sized for this model (recurrent layers: their state, with the
  // conv weights a rollback replays with bound).
  KVCache make_cache(int n_seq, int ctx, int q_max = 64, int tree_slots = -1) const;

  // The final norm of q capture rows [q, d] -> [q, d]: the post-norm hidden
  // the head reads (logits_from_hidden's first step, the same bits). out may
  // alias hidden.
  void final_norm(const float* hidden, size_t q, float* out) const;

  // Runs rows through the decoder, appending their K/V to `kv`. Validates every
  // row (token id, position = next position of its sequence, context) before
  // touching the cache; throws InputError naming the offending row.
  void forward(std::span<const Row> rows, KVCache& kv, const ForwardOut& out,
               ThreadPool* pool) const;

  // Final norm + lm_head (+ soft-cap) of q hidden rows [q, d] -> [q, vocab].
  // Shared by the drafter's modules (the target's head, never copied).
  // `head`: instead of lm_head, a matrix of some of its rows (a drafter's draft
  // vocabulary, drafter/mtp_runner.h) -> [q, head->rows()]. Each logit is
  // bit-identical to lm_head's for the same row (batch-invariant kernels: a
  // row's dot product depends on that row and the input only).
  void logits_from_hidden(const float* hidden, size_t q, float* logits, ThreadPool* pool,
                          const kernels::PackedMatrix* head = nullptr) const;

  const Rope& rope() const { return rope_; }

  // logits_from_hidden for the rows of hidden [q, d] whose mask is 1 (mask null
  // = all), written to their rows of logits [q, width] (width = vocab, or
  // head->rows()); other rows untouched.
  void logits_for_rows(const float* hidden, size_t q, const uint8_t* mask, float* logits,
                       ThreadPool* pool, const kernels::PackedMatrix* head = nullptr) const;

  // The model's input embedding of a token (× embed_scale in fp32): exactly the
  // layer-0 input. [d]
  void embed(int32_t token, float* out) const;


 private:
  struct Scratch;
  // Per-layer embeddings: every layer's input [q, n_layers · ple_dim] into
  // scratch_->ple, from the rows' layer-0 inputs x [q, d] (projected, scaled,
  // normed per layer) and their rows of the per-layer table (transformers'
  // project_per_layer_inputs).
  void per_layer_inputs(std::span<const Row> rows, const float* x, ThreadPool* pool) const;

  LoadedModel m_;
  Rope rope_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace mtp::model
