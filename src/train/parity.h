// The parity gate (docs/INVARIANTS.md invariant 5): the training-side modules (libtorch,
// train/torch_mtp.h) and the engine's modules (drafter::MtpRunner, batch-
// invariant kernels) run teacher-forced on the same inputs; each module's
// hidden output and logits are compared, and the argmax must agree.
//
// Inputs: `random_sequences` sequences of random tokens with random Gaussian
// capture hidden states, and the first positions of `shard_sequences` held-out
// (else training) sequences from a shards folder. Module k, row t takes
// tok[t+k+1] and h_{k-1}[t] as in training; each side chains its own outputs.
//
// Pass: for every module, max|Δh| ≤ tol_h and max|Δlogit| ≤ tol_logit (see
// parity.cc for the derivation), and the engine's argmax equals the torch
// argmax (ties to the lowest index) on every position whose torch top-2 margin
// exceeds 2·tol_logit. Closer positions are near-ties: counted, reported, not
// gated.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "drafter/drafter.h"
#include "model/forward.h"

namespace mtp::train {

class TrainData;  // train/data.h

struct ParityOptions {
  int random_sequences = 2, random_len = 40;
  std::string shards_dir;  // "" = random inputs only
  const TrainData* data = nullptr;  // instead of shards_dir: a run's data (online)
  int shard_sequences = 2, shard_len = 64;
  uint64_t seed = 1;
  float hidden_scale = 1.0f;  // std-dev of the random capture
  int threads = 0;            // libtorch intra-op threads (0 = leave as is)
};

struct ModuleParity {
  double max_dh = 0, max_dlogit = 0;  // max |engine − torch|
  double tol_h = 0, tol_logit = 0;
  double ref_h = 0, ref_logit = 0;    // scales the tolerances were derived from
  long positions = 0;                 // rows compared
  long decided = 0, agreed = 0;       // rows with margin > 2·tol_logit / of them, same argmax
  long near_ties = 0, near_tie_agreed = 0;
  std::vector<int32_t> engine_argmax;  // every row, in input order (for tests)
  bool passed = false;
};

struct ParityReport {
  std::vector<ModuleParity> modules;
  std::vector<std::string> inputs;  // what was compared ("random ×2 (40)", "shards ×2 (64)")
  bool passed = false;
  std::string text() const;         // a human-readable table
  nlohmann::json to_json() const;
};

// The tolerance rule derived in parity.cc: C·stages·u·√n·scale for a chain
// of `stages` compute stages whose longest reduction is n long, at the
// activations' `scale` (C = 64, u = 2^-24). The assistant's gate
// (train/assistant_parity.h) uses it too.
double fp32_tolerance(double stages, double n, double scale);
// The argmax of x[0..n) (ties: the lowest index) and its margin over the
// runner-up.
void top2(const float* x, size_t n, int32_t& arg, double& margin);

// The target as the engine side of the gate reads it: a block-quantized head
// (a GGUF or requantized target: Q8_0, Q4_K_M's Q6_K ...) held as its exact
// dequantized values in fp32, which is what libtorch multiplies. The engine
// runs such a head on activations quantized to int8 per block (quant_dot.h),
// an error the gates' tolerances do not model (2e-2 on a small Q8_0 target
// against a tolerance of 7e-4) and which is the quantized kernels' own
// contract, tested there; the drafter's own block matrices are compared the
// same way (Drafter::with_float_matrices). nullopt: the head is float already.
std::optional<model::Model> with_float_head(const model::Model& target);

// `torch_tensors`: the drafter's tensors by name for the libtorch side (a
// training checkpoint's weights); `engine`: the drafter file as the engine
// loaded it; `target` as loaded (a block-quantized head is compared as its
// dequantized fp32 values: with_float_head). Does not throw on
// failure: check report.passed.
ParityReport run_parity(const model::Model& target, const drafter::Drafter& engine,
                        const std::map<std::string, std::vector<float>>& torch_tensors,
                        const ParityOptions& o, ThreadPool* pool);

}  // namespace mtp::train
