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
};

// Presets: "1b" (Llama-shaped, ~1.1 B parameters: d 2048, 22 layers, 32/4
// heads, ffn 5632, vocab 32000), "tiny" (d 64, 2 layers; for smoke tests).
RandomModelSpec random_model_preset(const std::string& name);  // InputError if unknown

// A Llama-architecture model with weights held as `hold`; the embedding table
// is stored in bf16 (as checkpoints of this size are).
LoadedModel random_model(const RandomModelSpec& spec, kernels::WeightType hold, uint64_t seed);

}  // namespace mtp::model
