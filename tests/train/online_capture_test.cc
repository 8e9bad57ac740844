// What online training trains on is what the engine serves, bit for bit: the
// online capture (train::OnlineData on the engine's forward, batches of
// several sequences per call) against the capture inference computes — one
// token per forward, as decode does, each sequence alone — on random targets
// of every family the engine loads. Plain sequences and greedy
// self-distillation (the continuation itself must be the engine's greedy one).
// Rounded to bf16, it is the fp32 capture rounded (what a shard stores).
#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "core/dtype.h"
#include "core/error.h"
#include "drafter/capture.h"
#include "io/pretrain_data.h"
#include "kernels/ops.h"
#include "model_util.h"
#include "test_util.h"
#include "train/online_data.h"
#include "train_fixture.h"

namespace mtp::train {
namespace {

struct Decoded {
  std::vector<int32_t> tokens;
  std::vector<float> hidden;  // [n, d]
};

// Inference's capture: one row per forward; a generating job continues with
// the greedy choice (kernels::argmax: ties to the lowest id) until a stop
// token, its budget or the sequence length.
Decoded decode_one_by_one(const model::Model& m, const drafter::CaptureJob& j, int seq_len,
                          const std::vector<int32_t>& stops) {
  const size_t d = size_t(m.config().d_model), V = size_t(m.config().vocab);
  model::KVCache kv = m.make_cache(1, seq_len, 1, 0);
  Decoded out{j.tokens, {}};
  std::vector<float> h(d), logits(V);
  int budget = j.gen;
  for (size_t p = 0; p < out.tokens.size(); ++p) {
    const model::Row row{0, int32_t(p), out.tokens[p]};
    const bool last = p + 1 == out.tokens.size();
    m.forward({&row, 1}, kv, {last && budget > 0 ? logits.data() : nullptr, nullptr, h.data()},
              nullptr);
    out.hidden.insert(out.hidden.end(), h.begin(), h.end());
    if (!last || budget <= 0) continue;
    const int32_t t = int32_t(kernels::argmax(logits.data(), V));
    if (std::binary_search(stops.begin(), stops.end(), t)) break;
    out.tokens.push_back(t);
    if (--budget == 0 || int(out.tokens.size()) >= seq_len) budget = 0;
  }
  return out;
}

// A jobs file as `mtpspec train --online` writes it (docs/FORMATS.md).
std::string write_jobs(const test::Target& t, const std::vector<std::vector<int32_t>>& jobs,
                       const drafter::CaptureSpec& spec, const std::string& tag) {
  io::PretrainData d;
  for (const auto& j : jobs) d.train.add_document(j, -1, -1);
  d.info = {{"kind", "online-capture"},
            {"identity", {{"target_fingerprint", t.fingerprint}}},
            {"identity_hash", "test"},
            {"capture", spec.to_json()},
            {"vocab", t.model->config().vocab},
            {"bos_id", -1},
            {"eos_id", -1}};
  const std::string path = test::temp_dir(tag) + "/jobs.safetensors";
  io::write_pretrain_data(path, d);
  return path;
}

void check_capture_family(model::Arch arch, bool self_distill) {
  test::RandomSpec spec = test::RandomSpec::for_arch(arch);
  spec.vocab = 96;
  const std::string name = std::string(model::arch_name(arch)) + (self_distill ? "_sd" : "_plain");
  test::Target t = test::load_target(test::random_hf_checkpoint("capture_" + name, spec));
  drafter::CaptureSpec cs;
  cs.seq_len = 40;
  cs.self_distill = self_distill;
  cs.gen_tokens = 0;
  cs.stops = {2};
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> jobs;
  for (int i = 0; i < 5; ++i) {
    const int n = self_distill ? 3 + int(rng() % 9) : 10 + int(rng() % 30);
    std::vector<int32_t> j;
    for (int k = 0; k < n; ++k) j.push_back(3 + int32_t(rng() % uint32_t(spec.vocab - 3)));
    jobs.push_back(j);
  }
  const std::string path = write_jobs(t, jobs, cs, "capture_jobs_" + name);
  for (DType dt : {DType::F32, DType::BF16}) {
    OnlineDataOptions o;
    o.jobs_path = path;
    o.hidden_dtype = dt;
    OnlineData data(o, t.model->config(), t.fingerprint, engine_capture(*t.model, 2));
    // Jobs 4, 1, 3 in one batch (several sequences per forward call).
    const std::vector<size_t> idx = {4, 1, 3};
    const Batch b = data.gather(Split::Train, idx);
    const size_t d = size_t(b.d), L = size_t(b.L);
    for (size_t r = 0; r < idx.size(); ++r) {
      drafter::CaptureJob job{jobs[idx[r]], 0, long(idx[r])};
      if (self_distill) job.gen = drafter::self_distill_gen(int(job.tokens.size()), cs.seq_len, 0);
      const Decoded ref = decode_one_by_one(*t.model, job, cs.seq_len, cs.stops);
      const size_t n = ref.tokens.size();
      ASSERT_LE(n, L);
      EXPECT_EQ(
          std::vector<int32_t>(b.tokens.begin() + long(r * L), b.tokens.begin() + long(r * L + n)),
          ref.tokens)
          << name << " job " << idx[r];
      const std::vector<uint8_t> mask =
          drafter::capture_loss_mask(n, job.tokens.size(), self_distill);
      EXPECT_EQ(
          std::vector<uint8_t>(b.mask.begin() + long(r * L), b.mask.begin() + long(r * L + n)),
          mask);
      std::vector<float> want = ref.hidden;
      round_to(dt, want.data(), want.size());
      const std::vector<float> got(b.hidden.begin() + long(r * L * d),
                                   b.hidden.begin() + long((r * L + n) * d));
      EXPECT_EQ(test::first_bit_difference(got, want), -1)
          << name << " job " << idx[r] << " " << dtype_name(dt);
    }
  }
}

TEST(OnlineCapture, EngineDecodeCaptureEqualsOnlineCaptureEveryFamily) {
  for (model::Arch a : test::every_arch()) check_capture_family(a, false);
}

TEST(OnlineCapture, GreedySelfDistillationIsTheEnginesDecodeEveryFamily) {
  for (model::Arch a : test::every_arch()) check_capture_family(a, true);
}

// Jobs written for another target, or a token file that is no jobs file, are
// refused before any capture.
TEST(OnlineCapture, JobsOfAnotherTargetOrKindAreRefused) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 96;
  test::Target t = test::load_target(test::random_hf_checkpoint("capture_refused", spec));
  drafter::CaptureSpec cs;
  cs.seq_len = 16;
  OnlineDataOptions o;
  o.jobs_path = write_jobs(t, {{3, 4, 5, 6}}, cs, "capture_refused_jobs");
  test::expect_error<ConfigError>(
      [&] { OnlineData d(o, t.model->config(), "other", engine_capture(*t.model, 1)); },
      {"tokenized for target " + t.fingerprint, "this target is other"});
  io::PretrainData plain;
  plain.train.add_document({3, 4, 5}, -1, -1);
  plain.info = {{"kind", "pretrain"}, {"vocab", 96}};
  o.jobs_path = test::temp_dir("capture_refused_kind") + "/tokens.safetensors";
  io::write_pretrain_data(o.jobs_path, plain);
  test::expect_error<FormatError>(
      [&] { OnlineData d(o, t.model->config(), t.fingerprint, engine_capture(*t.model, 1)); },
      {"not the jobs of an online training run"});
}

}  // namespace
}  // namespace mtp::train
