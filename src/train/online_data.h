// Online training data: every batch's capture is computed by the frozen target
// as training runs, from the jobs `mtpspec train --online` tokenized
// (RUN_DIR/online/jobs.safetensors, drafter::CaptureSpec) — nothing is stored.
//
// A batch holds exactly what the shards of a precompute with the same corpus,
// settings and seed hold: the same jobs (ids), the same capture function
// (drafter::capture_jobs on the engine's Model::forward, batch-invariant), the
// same token rule for self-distillation (speculative::Sampler at the spec's
// temperature, seeded by drafter::self_distill_seed(seed, id)), the capture
// rounded to the hidden dtype as a shard stores it. So training on it gives
// the offline run's losses bit for bit (tests/train/online_test.cc).
//
// The target is a TargetCapture: the engine (CPU, the inference bits) or a
// libtorch implementation of it (train/torch_target.h: on a GPU). Held-out
// batches are computed once and kept (evaluation and parity reread them).
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "drafter/capture.h"
#include "model/forward.h"
#include "train/data.h"

namespace mtp::train {

// The frozen target computing drafter::capture_jobs' result for a batch.
class TargetCapture {
 public:
  virtual ~TargetCapture() = default;
  virtual std::vector<drafter::Captured> capture(std::span<const drafter::CaptureJob* const> jobs,
                                                 const drafter::CaptureOptions& o) = 0;
  virtual std::string name() const = 0;  // "engine (cpu)", "libtorch (cuda)"
  // Its capture of `tokens` against the engine's (train/torch_target.h
  // CaptureGap as JSON); null for the engine itself (the same bits).
  virtual nlohmann::json gap(const std::vector<int32_t>& tokens) {
    (void)tokens;
    return nullptr;
  }
};

// The engine's forward with a pool of `threads` workers (the inference bits).
std::unique_ptr<TargetCapture> engine_capture(const model::Model& m, int threads);
// By name (TrainOptions::target_forward): "engine", "torch" (the libtorch
// target on `dev`, train/torch_target.h) or "auto" (engine on cpu, torch on cuda).
std::unique_ptr<TargetCapture> target_capture(const std::string& name, const model::Model& m,
                                              torch::Device dev, int threads);

struct OnlineDataOptions {
  std::string jobs_path;
  DType hidden_dtype = DType::BF16;  // what the capture is rounded to (as a shard stores it)
  uint64_t seed = 0;                 // self-distillation's sampling seed
};

class OnlineData final : public TrainData {
 public:
  // Reads the jobs file; ConfigError when it was made for another target
  // (fingerprint), FormatError when it is not a jobs file.
  OnlineData(const OnlineDataOptions& o, const model::ModelConfig& target,
             const std::string& fingerprint, std::unique_ptr<TargetCapture> capture);

  int seq_len() const override { return spec_.seq_len; }
  DType hidden_dtype() const override { return o_.hidden_dtype; }
  size_t size(Split s) const override { return (s == Split::Train ? train_ : held_).size(); }
  Batch gather(Split s, const std::vector<size_t>& idx) const override;
  // {"online": {identity_hash, capture, hidden_dtype, seed}}
  nlohmann::json trajectory() const override;
  // {"online", {jobs, identity_hash, counts, corpus, target_forward}}
  std::pair<std::string, nlohmann::json> record() const override;

  const drafter::CaptureSpec& spec() const { return spec_; }
  const nlohmann::json& info() const { return info_; }
  std::string target_forward() const { return capture_->name(); }
  // The target's capture gap on the first held-out (else training) job's
  // tokens: null for the engine (the same bits), else CaptureGap's JSON.
  nlohmann::json capture_gap() const;
  // Occurrences of each token among the training labels (loss mask 1), for a
  // draft vocabulary: exact for plain jobs (their tokens); InputError for
  // self-distilled ones, whose labels the target generates as training runs.
  std::vector<long> label_counts() const;
  // Time spent capturing and the real tokens captured (throughput reports).
  double capture_seconds() const { return capture_seconds_; }
  long captured_tokens() const { return captured_tokens_; }

 private:
  OnlineDataOptions o_;
  drafter::CaptureSpec spec_;
  nlohmann::json info_;
  int d_ = 0;
  std::vector<drafter::CaptureJob> train_, held_;
  std::unique_ptr<TargetCapture> capture_;
  mutable std::map<std::vector<size_t>, Batch> held_cache_;
  mutable double capture_seconds_ = 0;
  mutable long captured_tokens_ = 0;
};

}  // namespace mtp::train
