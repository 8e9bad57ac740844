#include "train_fixture.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "core/mapped_file.h"
#include "drafter/native_head.h"
#include "drafter/shards.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "drafter/teacher_forced.h"
#include "test_util.h"
#include "train/export.h"

namespace mtp::test {

namespace fs = std::filesystem;

Target load_target(const std::string& path) {
  Target t;
  t.path = path;
  model::LoadedModel lm = model::load_model(path, {});
  t.fingerprint = model::target_fingerprint(lm, /*use_cache=*/false);
  t.model = std::make_unique<model::Model>(std::move(lm));
  return t;
}

void write_shards(const std::string& dir, const Target& t,
                  const std::vector<std::vector<int32_t>>& train,
                  const std::vector<std::vector<int32_t>>& heldout, int seq_len, DType hidden) {
  fs::create_directories(dir);
  const model::Model& m = *t.model;
  const size_t d = size_t(m.config().d_model);
  nlohmann::json shards = nlohmann::json::array();
  long counts[2] = {0, 0};
  int index = 0;
  for (int split = 0; split < 2; ++split) {
    const auto& seqs = split == 0 ? train : heldout;
    if (seqs.empty()) continue;
    drafter::ShardBuilder sb(seq_len, int(d), hidden);
    for (const auto& s : seqs) {
      // One sequence per cache; rows in calls of at most q_max.
      model::KVCache kv = m.make_cache(1, int(s.size()));
      std::vector<float> h(s.size() * d);
      const int q_max = kv.q_max();
      for (size_t t0 = 0; t0 < s.size(); t0 += size_t(q_max)) {
        const size_t t1 = std::min(s.size(), t0 + size_t(q_max));
        std::vector<model::Row> rows;
        for (size_t i = t0; i < t1; ++i) rows.push_back({0, int32_t(i), s[i]});
        model::ForwardOut out;
        out.hidden = h.data() + t0 * d;
        m.forward(rows, kv, out, nullptr);
      }
      sb.add(s, h.data(), std::vector<uint8_t>(s.size(), 1));
      counts[split] += long(s.size());
    }
    const std::string name = drafter::shard_file_name(index++);
    const std::string sp = split == 0 ? "train" : "heldout";
    sb.write((fs::path(dir) / name).string(), {{"split", sp}, {"target_fingerprint", t.fingerprint}});
    shards.push_back({{"file", name}, {"split", sp}, {"sequences", sb.sequences()},
                      {"tokens", sb.real_tokens()}});
  }
  nlohmann::json man = {{"format", drafter::kShardsFormat},
                        {"version", drafter::kShardsVersion},
                        {"target_fingerprint", t.fingerprint},
                        {"seq_len", seq_len},
                        {"hidden_dtype", std::string(dtype_name(hidden))},
                        {"d_model", int(d)},
                        {"vocab", m.config().vocab},
                        {"counts", {{"train_sequences", train.size()}, {"train_tokens", counts[0]},
                                    {"heldout_sequences", heldout.size()},
                                    {"heldout_tokens", counts[1]}}},
                        {"corpus", "synthetic (tests/train)"},
                        {"shards", shards}};
  write_file_atomic((fs::path(dir) / "manifest.json").string(), man.dump(1));
}

RuleCorpus rule_corpus(const std::string& tag, int vocab, int len, int n_train, int n_heldout,
                       uint64_t model_seed, uint32_t data_seed) {
  RuleCorpus c;
  RandomSpec spec;  // Llama, d 64
  spec.vocab = vocab;
  spec.n_layers = 1;
  spec.seed = model_seed;
  c.model = random_hf_checkpoint(tag + "_model", spec);
  std::mt19937 rng(data_seed);
  std::vector<int32_t> F(static_cast<size_t>(vocab));
  std::iota(F.begin(), F.end(), 0);
  std::shuffle(F.begin(), F.end(), rng);
  auto make = [&] {
    std::vector<int32_t> s = {int32_t(rng() % uint32_t(vocab)), int32_t(rng() % uint32_t(vocab))};
    while (int(s.size()) < len) s.push_back(F[size_t(s[s.size() - 2])]);
    return s;
  };
  std::vector<std::vector<int32_t>> train;
  for (int i = 0; i < n_train; ++i) train.push_back(make());
  for (int i = 0; i < n_heldout; ++i) c.heldout.push_back(make());
  c.shards = temp_dir(tag + "_shards");
  write_shards(c.shards, load_target(c.model), train, c.heldout, len);
  return c;
}

train::TrainOptions module0_options(const RuleCorpus& c, const std::string& run, long steps) {
  train::TrainOptions o = quick_options(c.shards, c.model, run);
  o.K = 1;
  o.steps = steps;
  o.batch = 8;
  o.lr = 3e-3;
  o.warmup = 10;
  o.ema = 0;
  return o;
}

std::string export_run(const std::string& run) {
  train::ExportOptions eo;
  eo.run_dir = run;
  eo.out = run + "/drafter.safetensors";
  eo.threads = 1;
  eo.verbose = false;
  train::export_drafter(eo);
  return eo.out;
}

train::TrainOptions quick_options(const std::string& shards, const std::string& model,
                                  const std::string& run) {
  train::TrainOptions o;
  o.shards_dir = shards;
  o.model_path = model;
  o.run_dir = run;
  o.threads = 1;
  o.progress = false;
  o.eval_every = 1000000;
  o.eval_sequences = 0;
  return o;
}

std::vector<std::vector<int32_t>> engine_predictions(const Target& t, const drafter::Drafter& d,
                                                     const std::vector<int32_t>& seq) {
  return drafter::teacher_forced(*t.model, d, seq, nullptr).argmax;
}

drafter::Drafter engine_drafter(const Target& t, const drafter::DrafterConfig& dc,
                                const std::map<std::string, std::vector<float>>& tensors,
                                const std::string& path) {
  drafter::write_drafter(path, t.model->config(), t.fingerprint, dc, tensors, {{"kind", "test"}});
  return drafter::Drafter::load(path, t.model->config(), t.fingerprint, kernels::WeightType::F32);
}

std::vector<float> native_head_logits(const model::Model& m, const std::vector<int32_t>& tokens,
                                      const model::Model& capture, bool post_norm) {
  const size_t T = tokens.size(), d = size_t(m.config().d_model);
  model::KVCache kv = capture.make_cache(1, int(T), int(T));
  std::vector<model::Row> rows;
  for (size_t t = 0; t < T; ++t) rows.push_back({0, int32_t(t), tokens[t]});
  std::vector<float> h(T * d);
  model::ForwardOut fo;
  fo.hidden = h.data();
  capture.forward(rows, kv, fo, nullptr);
  if (post_norm) capture.final_norm(h.data(), T, h.data());
  drafter::NativeHead head(m, 1, int(T), int(T));
  std::vector<model::Row> mrows;
  for (size_t t = 0; t + 1 < T; ++t) mrows.push_back({0, int32_t(t), tokens[t + 1]});
  std::vector<float> logits((T - 1) * size_t(m.config().vocab));
  head.forward(mrows, h.data(), nullptr, logits.data(), nullptr, nullptr);
  return logits;
}

}  // namespace mtp::test
