// One decoder layer of the target's family, applied in place to q rows.
// Shared by the target's forward and by the drafter's MTP modules (each module
// is "one transformer block of the target's layer shape" with its own KV cache),
// so both run exactly the same batch-invariant code.
#pragma once
#include <span>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace mtp::model {

// Rotary tables for a set of rows: [q, hd] = cos[hd/2] then sin[hd/2], hd the
// head width of the layers that use them.
class Rope {
 public:
  explicit Rope(const ModelConfig& c);
  // local: the sliding layers' table (the local base of Gemma 3/4, their own
  // head width on Gemma 4) if the config has one, else the global table:
  // global layers' base, scaling, head width and proportional part.
  void tables(std::span<const Row> rows, bool local, std::vector<float>& cs) const;
  bool has_local() const { return has_local_; }
  // Whether layer `sliding` flag selects the local table.
  bool local_for(bool sliding) const { return sliding && has_local_; }

 private:
  std::vector<float> inv_global_, inv_local_;  // [hd / 2] of the layers using them
  bool has_local_ = false;
};

struct BlockScratch {
  std::vector<float> xn, qkv, att, proj, gu, act, ple, ones;
  // Gated DeltaNet layers (linear_attn.cc): the input projections [q, C +
  // value_dim + 2·v_heads], the conv outputs [q, C], the gated outputs
  // [q, value_dim]; each sequence's rows of the call, in order.
  std::vector<float> lin_in, lin_conv, lin_out;
  std::vector<std::vector<size_t>> seq_rows;
  std::vector<uint32_t> tree_keys;    // tree rows' key slots, concatenated
  std::vector<size_t> tree_key_off;   // [q + 1]: row r's keys at [off[r], off[r + 1])
  std::vector<std::pair<size_t, size_t>> attn_units;  // attention units: rows [first, second)
};

// Layer `layer` of config `c` (its kind: c.layer_kind(layer)) on x: [q, d],
// the residual stream, updated in place. The rows' K/V go to layer `layer`
// of `kv` (positions already reserved with KVCache::begin_rows) unless the
// layer reads another's, whose cached K/V it then attends with. cs: the rope
// tables of these rows for this layer (Rope::local_for). ple: with
// per-layer embeddings, this layer's input [q rows of ple_dim, stride
// ple_stride] (Model::forward computes it).
void block_forward(const ModelConfig& c, int layer, const LayerWeights& L,
                   std::span<const Row> rows, KVCache& kv, const float* cs, float* x,
                   BlockScratch& s, ThreadPool* pool, const float* ple = nullptr,
                   size_t ple_stride = 0);

// block_forward's three steps around the attention itself, for a layer that
// attends with K/V it reads elsewhere (Gemma 4's assistant attends with the
// target's cache, drafter/assistant_runner.h):
// - attention_in: x's input norm and its rows' q (and a K/V owner's k/v,
//   written to *kv) projected, normed and rotated into s.qkv [q, qkv_dim]
//   (a layer owning no K/V: [q, H·hd], head h at h·hd; kv may be null);
// - attention_out: s.att [q, H·hd] through o_proj, (sandwich-)normed, added to x;
// - feed_forward: the MLP with its norms, the per-layer embedding and the
//   layer scalar, on x.
void attention_in(const ModelConfig& c, int layer, const LayerWeights& L,
                  std::span<const Row> rows, KVCache* kv, const float* cs, const float* x,
                  BlockScratch& s, ThreadPool* pool);
void attention_out(const ModelConfig& c, const LayerWeights& L, size_t q, float* x,
                   BlockScratch& s, ThreadPool* pool);
void feed_forward(const ModelConfig& c, int layer, const LayerWeights& L, size_t q, float* x,
                  BlockScratch& s, ThreadPool* pool, const float* ple = nullptr,
                  size_t ple_stride = 0);

// A Gated DeltaNet layer's token mixer (linear_attn.cc): from the normed
// rows xn [q, d] to the out_proj output [q, d] in s.proj, advancing each
// row's sequence state in kv (rows of a sequence in position order, the
// recurrence one token at a time: model/delta_rule.h).
void linear_attn_forward(const ModelConfig& c, int layer, const LayerWeights& L,
                         std::span<const Row> rows, KVCache& kv, const float* xn,
                         BlockScratch& s, ThreadPool* pool);

}  // namespace mtp::model
