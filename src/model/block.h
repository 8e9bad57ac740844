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

// Rotary tables for a set of rows: [q, head_dim] = cos[hd/2] then sin[hd/2].
class Rope {
 public:
  explicit Rope(const ModelConfig& c);
  // local: the sliding-layer base (Gemma 3's rope_local_base_freq) if the
  // config has one, else the global frequencies.
  void tables(std::span<const Row> rows, bool local, std::vector<float>& cs) const;
  bool has_local() const { return has_local_; }

 private:
  std::vector<float> inv_global_, inv_local_;  // [head_dim / 2]
  bool has_local_ = false;
};

struct BlockScratch {
  std::vector<float> xn, qkv, att, proj, gu, act;
  std::vector<uint32_t> tree_keys;    // tree rows' key slots, concatenated
  std::vector<size_t> tree_key_off;   // [q + 1]: row r's keys at [off[r], off[r + 1])
  std::vector<std::pair<size_t, size_t>> attn_units;  // attention units: rows [first, second)
};

// x: [q, d] residual stream, updated in place. The rows' K/V go to layer
// `kv_layer` of `kv` (positions already reserved with KVCache::begin_write).
// cs: rope tables for these rows (the caller picks global or local).
void block_forward(const ModelConfig& c, bool sliding, const LayerWeights& L,
                   std::span<const Row> rows, KVCache& kv, int kv_layer, const float* cs,
                   float* x, BlockScratch& s, ThreadPool* pool);

}  // namespace mtp::model
