// Runs the drafter's modules with the engine's batch-invariant kernels.
//
// Module k's rows (docs/SEMANTICS.md): row t has RoPE position t, embeds
// tok[t+k+1] (Row::token), takes h_{k-1}[t] (the target capture for k = 0,
// rounded to the drafter's hidden dtype here; module k-1's output otherwise),
// outputs h_k[t], and its logits (the TARGET's final norm + lm_head +
// soft-cap) predict tok[t+k+2]. Each module has its own KV cache; rows of a
// sequence are appended at its next positions and rolled back with truncate,
// exactly like the target's.
#pragma once
#include <span>
#include <vector>

#include "drafter/drafter.h"
#include "model/forward.h"

namespace mtp::drafter {

class MtpRunner {
 public:
  // KV caches for n_seq sequences of up to ctx rows per module.
  MtpRunner(const model::Model& target, const Drafter& drafter, int n_seq, int ctx,
            int q_max = 64);

  int K() const { return int(kv_.size()); }
  model::KVCache& kv(int k) { return kv_[k]; }
  const model::KVCache& kv(int k) const { return kv_[k]; }
  const Drafter& drafter() const { return d_; }
  const model::Model& target() const { return target_; }

  // h_in, h_out: [q, d]. logits: [q, logits_width()] for rows whose mask is 1
  // (mask null = every row; logits null = none). h_out may be null. A row with
  // a NaN or infinite logit (the drafter's forward overflowed) is given as all
  // zeros, with one warning on stderr naming the drafter.
  void forward(int k, std::span<const model::Row> rows, const float* h_in, float* h_out,
               float* logits, const uint8_t* mask, ThreadPool* pool);

  // Logit columns per row: the draft vocabulary's size, or the target's vocab.
  // Column i is the target-head logit of token token_of(i) (bit-identical to
  // the full head's), so argmax over a row, mapped by token_of, is the argmax
  // of the full logits restricted to the draft vocabulary (ties: lowest id).
  size_t logits_width() const { return head_ ? head_->rows() : size_t(target_.config().vocab); }
  int32_t token_of(size_t i) const {
    const std::vector<int32_t>& ids = d_.config().draft_vocab;
    return ids.empty() ? int32_t(i) : ids[i];
  }

 private:
  void neutralise_non_finite(int mk, size_t q, const uint8_t* mask, float* logits);
  const model::Model& target_;
  const Drafter& d_;
  std::vector<model::KVCache> kv_;
  const kernels::PackedMatrix* head_;  // lm_head's rows of the draft vocabulary (null: all)
  std::vector<float> cat_, x_, cs_;
  model::BlockScratch scratch_;
};

}  // namespace mtp::drafter
