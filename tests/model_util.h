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

// The logits [n, vocab] of `tokens` run through a fresh model and KV cache
// of `lm` in calls of the given sizes (cycled), on 2 threads.
std::vector<float> logits_of(const model::LoadedModel& lm, const std::vector<int32_t>& tokens,
                             const std::vector<int>& chunk_sizes);

// Random token ids in [lo, vocab).
std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int vocab, int lo = 3);

// Tolerance of an fp32 forward's output row against a reference computed in
// another order (reference_forward_test.cc explains the derivation):
// 64 · 2^-23 · sqrt(K · L) · row_scale, K the longest reduction (max of d,
// heads · head_dim, ffn, tokens), L the layers, row_scale ‖ref_row‖∞.
double fp32_forward_tolerance(double K, int L, double row_scale);

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
