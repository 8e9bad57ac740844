// Runs a checkpoint's native multi-token-prediction head (Qwen3.5's mtp.*,
// model/weights.h NativeMtpWeights) with the engine's batch-invariant kernels,
// as its authors' runtime applies it (vLLM's Qwen3_5MultiTokenPredictor and
// its MTP proposer, read not copied):
//
//   x   = fc · [norm_e(embed(token)); norm_h(h)]      (the target's embedding)
//   x   = one full-attention decoder layer of the target's shape at the row's
//         position, with the head's own KV cache
//   out = norm(x);  logits = lm_head · out           (the target's lm_head)
//
// Row p of a sequence (RoPE position p) embeds the token at sequence position
// p + 1 and reads h_p — the TARGET's hidden after its final norm at position p
// for a row of committed text, or the head's own `out` of row p - 1 for a
// draft row — and its logits predict the token at position p + 2. Rows of a
// sequence are appended at its next positions and rolled back with truncate.
#pragma once
#include <span>
#include <vector>

#include "model/block.h"
#include "model/forward.h"

namespace mtp::drafter {

class NativeHead {
 public:
  // KV caches for n_seq sequences of up to ctx rows, q_max rows per call.
  // InputError when the target holds no native head.
  NativeHead(const model::Model& target, int n_seq, int ctx, int q_max = 64);

  model::KVCache& kv() { return kv_; }
  const model::KVCache& kv() const { return kv_; }
  const model::Model& target() const { return target_; }
  const model::ModelConfig& config() const { return cfg_; }

  // h_in, out: [q, d] (out may be null); logits: [q, vocab] for rows whose
  // mask is 1 (mask null = every row; logits null = none).
  void forward(std::span<const model::Row> rows, const float* h_in, float* out, float* logits,
               const uint8_t* mask, ThreadPool* pool);

  // Whether the target has a head to run.
  static bool available(const model::Model& target) {
    return target.weights().mtp.present();
  }

 private:
  const model::Model& target_;
  model::ModelConfig cfg_;  // model::native_mtp_config of the target's
  model::KVCache kv_;
  std::vector<float> cat_, x_, out_, cs_, packed_, packed_logits_;
  model::BlockScratch scratch_;
};

}  // namespace mtp::drafter
