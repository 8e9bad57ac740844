// Shared set-up for the training tests: small targets, synthetic token
// corpora turned into shards (the target's own capture, as precompute writes
// them), and quick training options.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "drafter/drafter.h"
#include "model/forward.h"
#include "train/trainer.h"

namespace mtp::test {

struct Target {
  std::string path;
  std::unique_ptr<model::Model> model;
  std::string fingerprint;
};

Target load_target(const std::string& path);

// Runs the target over every sequence (Model::forward, the engine's capture)
// and writes dir/shard-00000 (train), dir/shard-00001 (heldout, if any) and
// dir/manifest.json. Sequences may be shorter than seq_len (padded, mask 0).
void write_shards(const std::string& dir, const Target& t,
                  const std::vector<std::vector<int32_t>>& train,
                  const std::vector<std::vector<int32_t>>& heldout, int seq_len,
                  DType hidden = DType::BF16);

// A 1-layer random Llama target and shards of sequences that follow a rule the
// target does not know: tok[t] = F[tok[t-2]] for a fixed random permutation F
// of the vocabulary (two random start tokens). Module 0, fed tok[t+1], can
// learn tok[t+2] = F[tok[t]] exactly — and only at the right offset.
struct RuleCorpus {
  std::string model, shards;
  std::vector<std::vector<int32_t>> heldout;
};
RuleCorpus rule_corpus(const std::string& tag, int vocab, int len, int n_train, int n_heldout,
                       uint64_t model_seed, uint32_t data_seed);

// Quick options for training module 0 alone (K = 1) on a RuleCorpus: batch 8,
// lr 3e-3, 10 warm-up steps, no EMA.
train::TrainOptions module0_options(const RuleCorpus& c, const std::string& run, long steps);
// Exports a finished run's drafter (raw weights, parity gate on, one thread,
// quiet) to run/drafter.safetensors and returns that path.
std::string export_run(const std::string& run);

// One thread, no progress output, no intermediate evals unless asked.
train::TrainOptions quick_options(const std::string& shards, const std::string& model,
                                  const std::string& run);

// The drafter's argmax rows (engine, teacher-forced) over `seq`: [k][t] guesses tok[t+k+2].
std::vector<std::vector<int32_t>> engine_predictions(const Target& t, const drafter::Drafter& d,
                                                     const std::vector<int32_t>& seq);

// Writes a drafter file from tensors and loads it as the engine does.
drafter::Drafter engine_drafter(const Target& t, const drafter::DrafterConfig& dc,
                                const std::map<std::string, std::vector<float>>& tensors,
                                const std::string& path);

// The engine's native head of m teacher-forced on `capture`'s forward of
// `tokens`: row t embeds tokens[t + 1] and reads capture's hidden at t after
// its final norm (post_norm false: before it, a planted fault); [T - 1, V].
std::vector<float> native_head_logits(const model::Model& m, const std::vector<int32_t>& tokens,
                                      const model::Model& capture, bool post_norm = true);

}  // namespace mtp::test
