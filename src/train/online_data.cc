#include "train/online_data.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "io/pretrain_data.h"
#include "core/setting.h"
#include "speculative/cycle/sampler.h"
#include "train/torch_target.h"

namespace mtp::train {

namespace fs = std::filesystem;

namespace {

class EngineCapture final : public TargetCapture {
 public:
  EngineCapture(const model::Model& m, int threads) : m_(m), pool_(threads) {}
  std::vector<drafter::Captured> capture(std::span<const drafter::CaptureJob* const> jobs,
                                         const drafter::CaptureOptions& o) override {
    return drafter::capture_jobs(m_, jobs, o, &pool_);
  }
  std::string name() const override { return "engine (cpu)"; }

 private:
  const model::Model& m_;
  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<TargetCapture> engine_capture(const model::Model& m, int threads) {
  return std::make_unique<EngineCapture>(m, threads);
}

std::unique_ptr<TargetCapture> target_capture(const std::string& name, const model::Model& m,
                                              torch::Device dev, int threads) {
  const bool torch_forward = name == "torch" || (name == "auto" && dev.is_cuda());
  if (name != "engine" && name != "torch" && name != "auto") {
    fail_setting<InputError>("target_forward", "the target's forward is engine, torch or auto, "
                             "got '{}'", name);
  }
  if (!torch_forward) return engine_capture(m, threads);
  return torch_capture(m, dev);
}

OnlineData::OnlineData(const OnlineDataOptions& o, const model::ModelConfig& target,
                       const std::string& fingerprint, std::unique_ptr<TargetCapture> capture)
    : o_(o), d_(target.d_model), capture_(std::move(capture)) {
  io::PretrainData d = io::read_pretrain_data(o.jobs_path);
  info_ = d.info;
  const std::string where = "'" + o.jobs_path + "': __metadata__['info']";
  if (json_value<std::string>(info_, "kind", "", where) != "online-capture") {
    fail<FormatError>("'{}' is a token file but not the jobs of an online training run (info "
                      "kind online-capture)", o.jobs_path);
  }
  const nlohmann::json identity = json_get<nlohmann::json::object_t>(info_, "identity", where);
  const std::string fp = json_get<std::string>(identity, "target_fingerprint", where + "['identity']");
  if (fp != fingerprint) {
    fail<ConfigError>("the online jobs in '{}' were tokenized for target {}; this target is {}: "
                      "write the jobs with this model", o.jobs_path, fp, fingerprint);
  }
  if (json_get<int64_t>(info_, "vocab", where) != target.vocab) {
    fail<FormatError>("{}: vocab {} differs from the target's {}", where,
                      json_get<int64_t>(info_, "vocab", where), target.vocab);
  }
  spec_ = drafter::CaptureSpec::from_json(
      json_get<nlohmann::json::object_t>(info_, "capture", where), where + "['capture']");
  if (spec_.seq_len > target.max_position) {
    fail<FormatError>("{}: sequences of {} tokens exceed the target's context of {}", where,
                      spec_.seq_len, target.max_position);
  }
  train_ = drafter::jobs_of_stream(d.train, 0, spec_);
  held_ = drafter::jobs_of_stream(d.heldout, long(train_.size()), spec_);
  if (train_.empty()) fail<InputError>("the online jobs in '{}' hold no training sequence", o.jobs_path);
}

Batch OnlineData::gather(Split s, const std::vector<size_t>& idx) const {
  if (s == Split::Heldout) {
    auto it = held_cache_.find(idx);
    if (it != held_cache_.end()) return it->second;
  }
  const auto& jobs = s == Split::Train ? train_ : held_;
  std::vector<const drafter::CaptureJob*> batch;
  for (size_t i : idx) batch.push_back(&jobs.at(i));
  std::vector<speculative::Sampler> samplers;
  for (const drafter::CaptureJob* j : batch) {
    speculative::SamplerOptions so;
    so.temperature = spec_.temp;
    so.seed = drafter::self_distill_seed(o_.seed, j->id);
    samplers.emplace_back(so);
  }
  drafter::CaptureOptions co;
  co.seq_len = spec_.seq_len;
  co.stops = spec_.stops;
  co.choose = [&](size_t b, const float* logits, size_t V, int64_t pos) {
    return samplers[b].sample(logits, V, pos);
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<drafter::Captured> cap = capture_->capture(batch, co);
  capture_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // As ShardSet::gather: cut to the longest sequence, padding with mask 0.
  Batch b;
  b.B = int(cap.size());
  b.d = d_;
  for (const drafter::Captured& c : cap) b.L = std::max(b.L, int(c.tokens.size()));
  const size_t L = size_t(b.L), d = size_t(d_);
  b.tokens.assign(size_t(b.B) * L, 0);
  b.mask.assign(size_t(b.B) * L, 0);
  b.hidden.assign(size_t(b.B) * L * d, 0.f);
  for (size_t j = 0; j < cap.size(); ++j) {
    drafter::Captured& c = cap[j];
    const size_t n = c.tokens.size();
    round_to(o_.hidden_dtype, c.hidden.data(), n * d);  // the stored value of a shard
    if (o_.hidden_dtype == DType::F16) {
      for (size_t i = 0; i < n * d; ++i) {
        if (!std::isfinite(c.hidden[i])) {
          fail_setting<InputError>("hidden_dtype", "the capture of job {} has a value beyond "
                                   "fp16's range (±65,504); hold the capture in bf16", batch[j]->id);
        }
      }
    }
    std::copy(c.tokens.begin(), c.tokens.end(), b.tokens.begin() + long(j * L));
    std::copy(c.loss_mask.begin(), c.loss_mask.end(), b.mask.begin() + long(j * L));
    std::copy(c.hidden.begin(), c.hidden.end(), b.hidden.begin() + long(j * L * d));
    b.real_tokens += long(n);
  }
  captured_tokens_ += b.real_tokens;
  if (s == Split::Heldout) held_cache_.emplace(idx, b);
  return b;
}

std::vector<long> OnlineData::label_counts() const {
  if (spec_.self_distill) {
    fail_setting<InputError>("draft_vocab", "the labels of a self-distilled online run are "
                             "generated as it trains and not stored: export it without a draft "
                             "vocabulary, or train from self-distilled shards");
  }
  std::vector<long> counts(size_t(info_["vocab"].get<int64_t>()), 0);
  for (const drafter::CaptureJob& j : train_) {
    const std::vector<uint8_t> mask = drafter::capture_loss_mask(j.tokens.size(), j.tokens.size(), false);
    for (size_t i = 0; i < j.tokens.size(); ++i) counts[size_t(j.tokens[i])] += mask[i];
  }
  return counts;
}

nlohmann::json OnlineData::capture_gap() const {
  // Jobs' tokens (held-out first) up to a sequence's length: a long sequence
  // whatever the prompt length.
  std::vector<int32_t> tokens;
  for (const auto* split : {&held_, &train_}) {
    for (const drafter::CaptureJob& j : *split) {
      for (int32_t t : j.tokens) {
        if (int(tokens.size()) < spec_.seq_len) tokens.push_back(t);
      }
    }
  }
  return capture_->gap(tokens);
}

nlohmann::json OnlineData::trajectory() const {
  return {{"online",
           {{"identity_hash", info_.value("identity_hash", std::string())},
            {"capture", spec_.to_json()},
            {"hidden_dtype", std::string(dtype_name(o_.hidden_dtype))},
            {"seed", o_.seed}}}};
}

std::pair<std::string, nlohmann::json> OnlineData::record() const {
  return {"online",
          {{"jobs", fs::absolute(o_.jobs_path).string()},
           {"identity_hash", info_.value("identity_hash", std::string())},
           {"seq_len", spec_.seq_len},
           {"hidden_dtype", std::string(dtype_name(o_.hidden_dtype))},
           {"seed", o_.seed},
           {"counts", info_.value("counts", nlohmann::json())},
           {"corpus", info_.value("corpus", nlohmann::json())},
           {"target_forward", capture_->name()}}};
}

}  // namespace mtp::train
