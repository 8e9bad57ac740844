// Randomly initialised targets generated in memory from a spec and a seed —
// for benchmarks only (decode speed does not depend on weight values), never
// for tests of correctness. Weights are N(0, 1/√fan_in), norms 1.
#pragma once
#include <cstdint>
#include <string>

#include "model/loader.h"

namespace mtp::model {

struct RandomModelSpec {
  std::string name;
  int d_model, n_layers, n_heads, n_kv_heads, ffn, vocab, max_position;
  // Gemma 4 (arch Gemma4): sliding head_dim, full layers' head_dim,
  // per-layer embedding width, shared layers (double-wide MLPs), the
  // sliding window and the layer pattern's period (the last of each period
  // full).
  // Qwen3.5 (arch Qwen35): head_dim, period 4 (the last layer of each full
  // attention, the others Gated DeltaNet), the DeltaNet's value heads, a
  // tied head.
  Arch arch = Arch::Llama;
  int head_dim = 0, global_head_dim = 0, ple_dim = 0, kv_shared = 0, window = 0, period = 0;
  int lin_v_heads = 0;
  bool tie = false;
};

// Presets: "1b" (Llama-shaped, ~1.1 B parameters: d 2048, 22 layers, 32/4
// heads, ffn 5632, vocab 32000), "tiny" (d 64, 2 layers; for smoke tests),
// "gemma4-e2b" (Gemma 4 E2B's real shapes, transformers'
// convert_gemma4_weights.py: d 1536, 35 layers 4 sliding : 1 full, 8 heads,
// 1 kv head, head_dim 256 / 512, ffn 6144 (12288 on the 20 shared layers),
// per-layer embeddings 256 wide, window 512, vocab 262144, tied head),
// "qwen35-0.8b" / "qwen35-4b" (Qwen3.5's published shapes: d 1024 / 2560,
// 24 / 32 layers 3 Gated DeltaNet : 1 gated full attention, 8/2 / 16/4
// heads of 256, MLP 3584 / 9216, DeltaNet 16 key heads and 16 / 32 value
// heads of 128, conv 4, vocab 248320; the 0.8B's head tied), "qwen3-0.6b"
// (Qwen3-0.6B: d 1024, 28 layers, 16/8 heads of 128, MLP 3072, vocab
// 151936, tied; the transformer to compare Qwen3.5-0.8B's verify with).
RandomModelSpec random_model_preset(const std::string& name);  // InputError if unknown

// A model with weights held as `hold`; the embedding table is stored in bf16
// (as checkpoints of this size are). Gemma 4's per-layer table
// ([vocab, layers · 256] bf16, 4.7 GB for E2B) is an anonymous mapping of
// zeros that is never written: pages a lookup reads map the zero page, so
// it costs address space, not memory — its values do not change the speed.
// A tied head reads the table as `tied` says (model::TiedHead).
LoadedModel random_model(const RandomModelSpec& spec, kernels::WeightType hold, uint64_t seed,
                         TiedHead tied = TiedHead::Auto);

}  // namespace mtp::model
