// Test helpers for running a Model: sequential reference runs and bitwise
// comparisons used by the bit-exactness property tests.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/forward.h"
#include "model/loader.h"

namespace mtp::test {

// Per-position outputs of a forward.
struct RowOutputs {
  std::vector<float> logits;  // [n, vocab]
  std::vector<float> hidden;  // [n, d]
};

// Forwards `tokens` into sequence `seq` of `kv` (starting at its current
// length) in calls of the given sizes (cycled), collecting every row's outputs.
RowOutputs run_chunks(const model::Model& m, model::KVCache& kv, int seq,
                      const std::vector<int32_t>& tokens, const std::vector<int>& chunk_sizes,
                      ThreadPool* pool);

// Random token ids in [lo, vocab).
std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int vocab, int lo = 3);

// Index of the first element where a and b differ bitwise, or -1.
long first_bit_difference(const std::vector<float>& a, const std::vector<float>& b);

// Writes a random llama2.c checkpoint (fp32, shared classifier when vocab > 0).
void write_random_llama2c(const std::string& path, int dim, int hidden, int layers, int heads,
                          int kv_heads, int vocab, int seq_len, uint32_t seed);

// A small random llama2.c target (d 32, 1 layer, vocab 50) written to DIR/t.bin,
// loaded, with its fingerprint (computed, not cached): for drafter files.
struct SmallTarget {
  model::LoadedModel lm;
  std::string fingerprint;
};
SmallTarget small_llama2c_target(const std::string& dir);

}  // namespace mtp::test
