#include "train/assistant_train.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/setting.h"
#include "core/thread_pool.h"
#include "drafter/assistant_gguf.h"
#include "drafter/gemma4_assistant.h"
#include "io/pretrain_data.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "train/assistant_parity.h"
#include "train/assistant_torch.h"
#include "train/data.h"
#include "train/online_data.h"
#include "train/pretrain_target.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace mtp::train {

namespace {

void check_options(const AssistantTrainOptions& o) {
  if (o.steps < 1 || o.seq_len < 3) {
    fail<InputError>("train-assistant: steps {} and sequence length {} must be >= 1 and >= 3",
                     o.steps, o.seq_len);
  }
  if (o.tokens.empty() == o.online_jobs.empty()) {
    fail_setting<InputError>("tokens", "train-assistant trains on a tokens file, online jobs or a "
                             "corpus (one of them; given: {})",
                             o.tokens.empty() ? "none" : "more than one");
  }
  if (o.batch < 1) fail_setting<InputError>("batch", "{} sequences per step (must be >= 1)", o.batch);
  if (o.K < 1 || o.K > 16) fail_setting<InputError>("K", "draft steps {} outside 1..16", o.K);
  if (o.seq_len < o.K + 2) {
    fail<InputError>("train-assistant: a window of {} tokens has no row for draft step {} (the "
                     "sequence length must be >= K + 2 = {})", o.seq_len, o.K, o.K + 2);
  }
  if (!(o.lr > 0)) fail<InputError>("train-assistant: learning rate {} must be > 0", o.lr);
}

// The token stream, checked against the target's vocabulary.
io::PretrainData read_stream(const AssistantTrainOptions& o, int vocab) {
  io::PretrainData data = io::read_pretrain_data(o.tokens);
  const std::vector<int32_t>& stream = data.train.tokens;
  if (stream.size() < size_t(o.seq_len)) {
    fail<InputError>("train-assistant: '{}' holds {} training tokens, fewer than one sequence of {}",
                     o.tokens, stream.size(), o.seq_len);
  }
  for (const std::vector<int32_t>* s : {&data.train.tokens, &data.heldout.tokens}) {
    for (int32_t t : *s) {
      if (t < 0 || t >= vocab) {
        fail<InputError>("train-assistant: '{}' holds token {}, outside the target's vocabulary "
                         "of {}", o.tokens, t, vocab);
      }
    }
  }
  return data;
}

// The training sequences (assistant_train.h): stream windows or the jobs'.
class Sequences {
 public:
  Sequences(const AssistantTrainOptions& o, const model::Model& m, int threads)
      : o_(o), rng_(o.seed) {
    if (!o.tokens.empty()) {
      stream_ = read_stream(o, m.config().vocab);
      return;
    }
    OnlineDataOptions oo;
    oo.jobs_path = o.online_jobs;
    oo.seed = o.seed;
    jobs_ = std::make_unique<OnlineData>(oo, m.config(), model::target_fingerprint(m.loaded()),
                                         engine_capture(m, threads));
    order_.emplace(jobs_->size(Split::Train), o.seed);
  }

  // Step s's batch sequences (called for s = 0, 1, ... in turn).
  std::vector<std::vector<int32_t>> step(int s) {
    std::vector<std::vector<int32_t>> out;
    if (!jobs_) {
      const std::vector<int32_t>& st = stream_.train.tokens;
      const size_t R = size_t(o_.seq_len);
      for (int b = 0; b < o_.batch; ++b) {
        const size_t start = size_t(rng_() % uint64_t(st.size() - R + 1));
        out.emplace_back(st.begin() + long(start), st.begin() + long(start + R));
      }
      return out;
    }
    std::vector<size_t> idx;
    for (int b = 0; b < o_.batch; ++b) idx.push_back(order_->at(uint64_t(s) * uint64_t(o_.batch) + uint64_t(b)));
    return split(jobs_->gather(Split::Train, idx));
  }

  // The parity gate's committed text: a held-out window of seq_len (else the
  // stream's first); for jobs, the first held-out (else training) sequence
  // of at least `min_len` tokens.
  std::vector<int32_t> gate(size_t min_len) const {
    if (!jobs_) {
      const size_t R = size_t(o_.seq_len);
      const std::vector<int32_t>& held =
          stream_.heldout.tokens.size() >= R ? stream_.heldout.tokens : stream_.train.tokens;
      return {held.begin(), held.begin() + long(R)};
    }
    for (Split sp : {Split::Heldout, Split::Train}) {
      for (size_t i = 0; i < jobs_->size(sp); ++i) {
        std::vector<std::vector<int32_t>> seq = split(jobs_->gather(sp, {i}));
        if (seq[0].size() >= min_len) return seq[0];
      }
    }
    fail<InputError>("train-assistant: the jobs in '{}' hold no sequence of {} tokens for the "
                     "parity gate", o_.online_jobs, min_len);
  }

 private:
  // A batch's sequences, each ending at its last token with loss mask 1.
  static std::vector<std::vector<int32_t>> split(const Batch& b) {
    std::vector<std::vector<int32_t>> out;
    for (size_t j = 0; j < size_t(b.B); ++j) {
      const size_t row = j * size_t(b.L);
      size_t n = 0;
      for (size_t i = 0; i < size_t(b.L); ++i) {
        if (b.mask[row + i]) n = i + 1;
      }
      out.emplace_back(b.tokens.begin() + long(row), b.tokens.begin() + long(row + n));
    }
    return out;
  }

  const AssistantTrainOptions& o_;
  std::mt19937_64 rng_;
  io::PretrainData stream_;
  std::unique_ptr<OnlineData> jobs_;
  std::optional<DataOrder> order_;
};

// Σ_j w_j · mean cross-entropy of step j over rows t = 1 .. R - j, each fed
// tok[t + j - 1] and labelled with the target's argmax there.
torch::Tensor chain_loss(const TorchAssistant& ta, const std::vector<torch::Tensor>& leaves,
                         const std::vector<int32_t>& toks, const AssistantCapture& cap,
                         const std::vector<double>& w, int step_shift) {
  const int64_t R = int64_t(toks.size());
  const int K = int(w.size());
  std::vector<std::vector<int32_t>> feed;
  for (int j = 2; j <= K; ++j) {
    std::vector<int32_t> f(toks.size(), 0);
    for (int64_t t = 0; t + j - 1 < R; ++t) f[size_t(t)] = toks[size_t(t + j - 1)];
    feed.push_back(std::move(f));
  }
  const std::vector<torch::Tensor> logits = ta.chain(leaves, toks, cap, feed, step_shift);
  torch::Tensor loss = torch::zeros({}, torch::kFloat32);
  for (int j = 1; j <= K; ++j) {
    const int64_t rows = R - j;  // t = 1 .. R - j
    if (rows < 1) continue;
    const auto labels = torch::tensor(std::vector<int64_t>(cap.target_argmax.begin() + j,
                                                           cap.target_argmax.end()));
    const auto l = logits[size_t(j - 1)].squeeze(0).narrow(0, 1, rows);
    loss = loss + w[size_t(j - 1)] * torch::nn::functional::cross_entropy(l, labels);
  }
  return loss;
}

}  // namespace

AssistantTrainResult train_assistant(const AssistantTrainOptions& o) {
  check_options(o);
  const std::vector<double> w = per_step_loss_weights(o.loss_weights, o.K);
  const model::Model m(model::load_model(o.target, {}));
  nlohmann::json config;
  if (o.init_from.empty()) {
    config = scratch_assistant_config(m.config(), o.shape);
  } else {
    const std::string cfg_path = (fs::path(o.init_from) / "config.json").string();
    config = parse_json(read_file(cfg_path), "'" + cfg_path + "'");
  }
  const drafter::AssistantConfig ac = drafter::parse_assistant_config(
      config, m.config(), o.init_from.empty() ? "the scratch assistant" : o.init_from);
  std::vector<int32_t> ordering;
  const torch::Device cpu(torch::kCPU);
  const TorchAssistant ta(m, ac, cpu);
  std::vector<float> init;
  if (o.init_from.empty()) {
    init = init_flat_params(ta.layout(), ac.block.n_layers, o.seed,
                            {"o_proj.weight", "down_proj.weight", "post_projection.weight"});
  } else {
    ordering = drafter::Gemma4Assistant::load(o.init_from, m.config()).weights().ordering;
    init = ta.read_dir(o.init_from);
  }
  const int threads = resolve_threads(o.threads);
  set_threads(threads);
  ThreadPool pool(threads);
  Sequences data(o, m, threads);
  torch::Tensor flat = ta.layout().to_flat(init, cpu);
  // The views share flat's storage: the optimizer's in-place steps train it.
  std::vector<torch::Tensor> leaves = ta.layout().views(flat, true);
  torch::optim::Adam opt(leaves, torch::optim::AdamOptions(o.lr));
  AssistantTrainResult r;
  for (int s = 0; s < o.steps; ++s) {
    const std::vector<std::vector<int32_t>> batch = data.step(s);
    opt.zero_grad();
    double loss = 0;
    for (const std::vector<int32_t>& toks : batch) {
      if (toks.size() < 2) continue;  // no row to train (loss mask: nothing generated)
      const AssistantCapture cap = engine_capture(m, ac, toks, cpu, &pool);
      auto l = chain_loss(ta, leaves, toks, cap, w, o.step_shift) / double(batch.size());
      l.backward();
      loss += l.item<double>();
    }
    opt.step();
    r.losses.push_back(loss);
    if (s == 0 || (s + 1) % 10 == 0 || s + 1 == o.steps) {
      fmt::print(stderr, "[train-assistant] step {}/{}: loss {:.4f}\n", s + 1, o.steps,
                 r.losses.back());
    }
  }
  // The config plus the record of the target it was trained against
  // (drafter::AssistantRecord: transformers keeps and ignores it).
  config[drafter::kAssistantRecordKey] =
      drafter::AssistantRecord{model::target_fingerprint(m.loaded()),
                               model::arch_name(m.config().arch), drafter::kAssistantCapture}
          .to_json();
  const std::vector<float> trained = to_host(flat);
  ta.write_dir(o.out, config, trained, ordering);
  if (o.parity) {
    // The engine's assistant as every user loads the directory, on
    // held-out text (Sequences::gate).
    const std::vector<int32_t> gate = data.gate(size_t(std::max(3, o.K + 2)));
    const drafter::Gemma4Assistant eng = drafter::Gemma4Assistant::load(o.out, m.config());
    const auto p = ta.layout().views(ta.layout().to_flat(trained, cpu), false);
    const AssistantParity rep = assistant_parity(m, eng, ta, p, gate, o.K, o.step_shift);
    r.parity_ran = true;
    r.parity_passed = rep.passed;
    r.parity_text = rep.text();
    fmt::print(stderr, "{}", r.parity_text);
    if (!rep.passed) {
      fail<Error>("assistant parity gate FAILED: the libtorch assistant and the engine's "
                  "disagree on the draft chain (table above); '{}' is not to be used", o.out);
    }
  }
  if (!o.gguf.empty()) drafter::write_assistant_gguf(o.out, o.gguf);
  return r;
}

std::vector<std::vector<std::vector<int32_t>>> assistant_sequences(const AssistantTrainOptions& o,
                                                                   const model::Model& target) {
  check_options(o);
  Sequences data(o, target, resolve_threads(o.threads));
  std::vector<std::vector<std::vector<int32_t>>> out;
  for (int s = 0; s < o.steps; ++s) out.push_back(data.step(s));
  return out;
}

}  // namespace mtp::train
