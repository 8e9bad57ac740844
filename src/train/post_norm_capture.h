// The post-norm capture point, ONE rule for the trainers that draft from it
// (Gemma 4's assistant: train/assistant_torch.h engine_capture; Qwen3.5's
// native head: train/native_head_train.h): what drafter::Capture::PostNormHidden
// means at training time, computed by the ENGINE on the served target (any
// checkpoint it loads, quantized included), so a trainer sees the bits the
// draft source reads at inference.
//
// For a window of R tokens placed at positions 0..R-1 of one sequence (no
// earlier context), one Model::forward over all R rows gives, for every
// position p:
//   post[p]   = final_norm(hidden[p]): the target's residual after its last
//               decoder layer, through its final norm — the vector its
//               lm_head reads (not the pre-norm capture of the K-module
//               drafter, drafter/capture.h);
//   argmax[p] = the target's greedy next token after tok[0..p];
// and the cache that forward filled, every position kept (ctx = q_max = R:
// no sliding ring overwrote a slot), for readers of the target's K/V.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/kv_cache.h"

namespace mtp::train {

struct PostNormCapture {
  model::KVCache kv;            // one sequence, positions 0..R-1 (after norm and RoPE)
  std::vector<float> post;      // [R, d_model]
  std::vector<int32_t> argmax;  // [R]
};

// pool: the forward's workers (null: the calling thread). InputError for an
// empty window.
PostNormCapture post_norm_capture(const model::Model& m, const std::vector<int32_t>& tokens,
                                  ThreadPool* pool = nullptr);

}  // namespace mtp::train
