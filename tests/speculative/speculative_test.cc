// Speculative greedy generation with MTP drafters on real and random targets:
// - output identical to plain greedy, token for token (invariant 7, t = 0);
// - live ≡ teacher-forced: every live draft d_k whose d_0..d_{k-1} were accepted
//   equals the drafter's teacher-forced prediction at the same row (invariant 6);
// - drafter files for another target are refused (invariant 4).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "drafter/drafter.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/history.h"
#include "drafter/teacher_forced.h"
#include "spec_fixture.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

using Fixture = test::Target;
Fixture load(const std::string& path, kernels::WeightType wt = kernels::WeightType::F32) {
  return test::load_target(path, wt);
}
drafter::Drafter make_drafter(const Fixture& f, int K, int window, uint64_t seed,
                                std::vector<int32_t> draft_vocab = {},
                                DType stored = DType::F32) {
  return test::random_drafter(f, K, seed, window, std::move(draft_vocab), stored);
}

struct Checks {
  long tf_checked[4] = {0, 0, 0, 0};
};

// Generates with and without the drafter for several prompts and K = 1..K_max;
// expects identical outputs and live ≡ teacher-forced drafts.
void check_spec_equals_plain(const Fixture& f, const drafter::Drafter& d, int n_new,
                             int n_prompts, unsigned seed, Checks& checks, int threads = 1) {
  ThreadPool pool(threads);
  ThreadPool* p = threads > 1 ? &pool : nullptr;
  std::mt19937 rng(seed);
  const auto& c = f.model->config();
  for (int i = 0; i < n_prompts; ++i) {
    std::vector<int32_t> prompt = test::random_tokens(rng, 1 + int(rng() % 12), c.vocab);
    prompt[0] = c.bos_id >= 0 ? c.bos_id : prompt[0];
    GenerateOptions o;
    o.n_new = n_new;
    GenerateResult plain = generate(*f.model, nullptr, prompt, o, p);
    for (int k = 1; k <= d.config().K; ++k) {
      SCOPED_TRACE(testing::Message() << "prompt " << i << " K=" << k);
      SpecOptions so;
      so.drafter = &d;
      so.draft_k = k;
      so.record_trace = true;
      GenerateResult spec = generate(*f.model, nullptr, prompt, o, p, nullptr, so);
      ASSERT_EQ(spec.token_ids, plain.token_ids);
      ASSERT_EQ(spec.finish_reason, plain.finish_reason);
      ASSERT_TRUE(spec.stats.has_value());
      // Live ≡ teacher-forced over the final sequence.
      std::vector<int32_t> seq = prompt;
      seq.insert(seq.end(), spec.token_ids.begin(), spec.token_ids.end());
      drafter::TeacherForced tf = drafter::teacher_forced(*f.model, d, seq, p);
      for (const CycleTrace& cyc : spec.trace) {
        const int N = cyc.n_committed, t = N - 2;
        for (int j = 0; j < int(cyc.drafts.size()) && j <= cyc.accepted; ++j) {
          if (N + j - 1 >= int(seq.size())) break;  // generation ended inside the cycle
          ASSERT_LT(size_t(t), tf.argmax[j].size());
          ASSERT_EQ(tf.argmax[j][t], cyc.drafts[j])
              << "live draft d_" << j << " at N=" << N << " differs from teacher forcing";
          if (j < 4) ++checks.tf_checked[j];
        }
      }
    }
  }
}

TEST(Speculative, Stories260KRandomDrafterMatchesPlain) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  Fixture f = load(path);
  drafter::Drafter d = make_drafter(f, 4, 0, 1);
  Checks ch;
  check_spec_equals_plain(f, d, 40, 4, 3, ch);
  EXPECT_GT(ch.tf_checked[0], 0);
}

// A 12-token vocabulary makes random drafts right often enough that deep
// positions (d_1, d_2, d_3) are reached and checked live ≡ teacher-forced.
TEST(Speculative, SmallVocabReachesDeepPositions) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 8;
  spec.eos_ids = {};  // nothing stops generation early
  std::string dir = test::random_hf_checkpoint("spec-small", spec);
  Fixture f = load(dir);
  for (int window : {0, 5}) {
    drafter::Drafter d = make_drafter(f, 4, window, 2 + window);
    Checks ch;
    for (int threads : {1, 2}) check_spec_equals_plain(f, d, 60, 6, 5 + threads, ch, threads);
    EXPECT_GT(ch.tf_checked[1], 5);
    EXPECT_GT(ch.tf_checked[2], 0);
  }
}

// A drafter stored in BF16 (held in BF16 under an fp32 target) that drafts
// only among some tokens: still lossless, live ≡ teacher-forced, and every
// draft lies in its draft vocabulary. Gemma 2 brings the logit soft-cap.
TEST(Speculative, DraftVocabularyBf16DrafterMatchesPlain) {
  for (model::Arch a : {model::Arch::Llama, model::Arch::Gemma2}) {
    SCOPED_TRACE(model::arch_name(a));
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    spec.vocab = 10;  // random drafts hit often enough to reach deep positions
    spec.eos_ids = {};
    std::string dir = test::random_hf_checkpoint("spec-dv", spec);
    Fixture f = load(dir);
    const std::vector<int32_t> ids = {1, 2, 4, 5, 7, 8, 9};
    drafter::Drafter d = make_drafter(f, 3, 0, 9, ids, DType::BF16);
    ASSERT_EQ(d.modules()[0].eh_proj.hold(), kernels::WeightType::BF16);
    Checks ch;
    check_spec_equals_plain(f, d, 50, 5, 21, ch);
    EXPECT_GT(ch.tf_checked[1], 0);
    GenerateOptions o;
    o.n_new = 50;
    SpecOptions so;
    so.drafter = &d;
    so.record_trace = true;
    GenerateResult r = generate(*f.model, nullptr, {int32_t(f.model->config().bos_id >= 0 ? f.model->config().bos_id : 1), 3, 6}, o, nullptr, nullptr, so);
    long drafts = 0;
    for (const CycleTrace& cyc : r.trace) {
      for (int32_t t : cyc.drafts) {
        ++drafts;
        EXPECT_TRUE(std::binary_search(ids.begin(), ids.end(), t)) << "drafted " << t;
      }
    }
    EXPECT_GT(drafts, 0);
  }
}

TEST(Speculative, EveryArchitectureMatchesPlain) {
  for (model::Arch a : {model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3,
                        model::Arch::Gemma2, model::Arch::Gemma3}) {
    SCOPED_TRACE(model::arch_name(a));
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    spec.vocab = 64;
    if (a == model::Arch::Gemma2 || a == model::Arch::Gemma3) spec.sliding_window = 7;
    std::string dir = test::random_hf_checkpoint("spec-arch", spec);
    // Float and block-quantized targets (requantized at load; a K type's
    // rows shorter than its 256-element super-block fall back as
    // llama-quantize does): the verify rows are batch-invariant for each.
    for (auto wt : {kernels::WeightType::F32, kernels::WeightType::BF16,
                    kernels::WeightType::Q8_0, kernels::WeightType::Q4_K}) {
      SCOPED_TRACE(kernels::weight_type_name(wt));
      Fixture f = load(dir, wt);
      drafter::Drafter d = make_drafter(f, 3, a == model::Arch::Gemma2 ? 6 : 0, 4);
      Checks ch;
      check_spec_equals_plain(f, d, 30, 3, 11, ch);  // 30 tokens > sliding window 7
    }
  }
}

// K-type targets whose rows are whole 256-element super-blocks (no fallback:
// Q4_K, Q5_K and Q6_K kernels themselves), every family: output == plain.
TEST(Speculative, KTypeTargetsMatchPlain) {
  for (model::Arch a : {model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3,
                        model::Arch::Gemma2, model::Arch::Gemma3}) {
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    spec.d_model = 256;
    spec.ffn = 512;
    spec.head_dim = 64;
    spec.vocab = 64;
    spec.n_layers = a == model::Arch::Gemma3 ? 2 : 1;
    if (a == model::Arch::Gemma2 || a == model::Arch::Gemma3) spec.sliding_window = 7;
    std::string dir = test::random_hf_checkpoint("spec-ktype", spec);
    for (auto wt : {kernels::WeightType::Q4_K, kernels::WeightType::Q5_K,
                    kernels::WeightType::Q6_K}) {
      SCOPED_TRACE(std::string(model::arch_name(a)) + " " + kernels::weight_type_name(wt));
      Fixture f = load(dir, wt);
      ASSERT_EQ(f.model->weights().layers[0].w_down.hold(), wt);
      drafter::Drafter d = make_drafter(f, 2, 0, 5);
      Checks ch;
      check_spec_equals_plain(f, d, 24, 2, 13, ch);
    }
  }
}

// The sources (sources/draft_source.h) each alone and all together,
// gated and not: output == plain generation (greedy, and coupled sampling at
// T > 0 with a seed); at T = 0 every live MTP draft inside the union equals
// teacher forcing, also in cycles after the MTP source was skipped (its rows
// caught up lazily). Returns the MTP cycles that followed a skipped cycle.
long check_union_equals_plain(const Fixture& f, const drafter::Drafter* d, int n_new,
                              int n_prompts, unsigned seed) {
  std::mt19937 rng(seed);
  const auto& c = f.model->config();
  long lazy = 0;
  // A datastore from unrelated random text and one plain output per prompt set.
  auto store = std::make_shared<HistoryStore>(3, size_t(1) << 20);
  for (int i = 0; i < 4; ++i) store->add(test::random_tokens(rng, 40, c.vocab));
  struct Config {
    const char* name;
    bool prompt, history, mtp, gate;
  };
  const Config configs[] = {{"prompt", true, false, false, true},
                            {"history", false, true, false, true},
                            {"mtp-gated", false, false, true, true},
                            {"union", true, true, true, true},
                            {"union-ungated", true, true, true, false}};
  for (int i = 0; i < n_prompts; ++i) {
    std::vector<int32_t> prompt = test::random_tokens(rng, 2 + int(rng() % 12), c.vocab);
    prompt[0] = c.bos_id >= 0 ? c.bos_id : prompt[0];
    for (float temp : {0.f, 0.8f}) {
     for (int ctx : {0, int(prompt.size()) + n_new / 2}) {  // a short context clips the drafts
      GenerateOptions o;
      o.n_new = n_new;
      o.ctx = ctx;
      o.sampler.temperature = temp;
      o.sampler.seed = seed + uint64_t(i);
      GenerateResult plain = generate(*f.model, nullptr, prompt, o, nullptr);
      for (const Config& cf : configs) {
        if (cf.mtp && !d) continue;
        SCOPED_TRACE(testing::Message() << "prompt " << i << " T=" << temp << " ctx=" << ctx
                                        << " " << cf.name);
        SpecOptions so;
        so.drafter = cf.mtp ? d : nullptr;
        if (cf.mtp) so.sources.push_back(kMtpSource);
        if (cf.prompt) so.sources.push_back(kPromptSource);
        if (cf.history) so.sources.push_back(kHistorySource);
        so.history = cf.history ? store : nullptr;
        so.lookup.max_draft = 5;
        so.gate = cf.gate;
        so.record_trace = true;
        GenerateResult spec = generate(*f.model, nullptr, prompt, o, nullptr, nullptr, so);
        EXPECT_EQ(spec.token_ids, plain.token_ids);
        EXPECT_EQ(spec.finish_reason, plain.finish_reason);
        if (temp != 0.f || !cf.mtp) continue;
        std::vector<int32_t> seq = prompt;
        seq.insert(seq.end(), spec.token_ids.begin(), spec.token_ids.end());
        drafter::TeacherForced tf = drafter::teacher_forced(*f.model, *d, seq, nullptr);
        bool prev_mtp = true;
        for (const CycleTrace& cyc : spec.trace) {
          const bool is_mtp = !cyc.source.empty() && cyc.source[0].is(kMtpSource);
          if (is_mtp && !prev_mtp) ++lazy;
          prev_mtp = is_mtp;
          if (!is_mtp) continue;
          const int N = cyc.n_committed, t = N - 2;
          for (int j = 0; j < int(cyc.drafts.size()) && j <= cyc.accepted; ++j) {
            if (N + j - 1 >= int(seq.size())) break;
            EXPECT_EQ(tf.argmax[j][t], cyc.drafts[j])
                << "live draft d_" << j << " at N=" << N << " differs from teacher forcing";
          }
        }
      }
      store->add(plain.token_ids);  // later prompts see earlier outputs
     }
    }
  }
  return lazy;
}

TEST(Speculative, UnionMatchesPlainOnRandomModels) {
  for (int vocab : {8, 64}) {
    test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
    spec.vocab = vocab;
    spec.eos_ids = {};
    std::string dir = test::random_hf_checkpoint("spec-union", spec);
    Fixture f = load(dir);
    drafter::Drafter d = make_drafter(f, 3, 0, 7);
    EXPECT_GT(check_union_equals_plain(f, &d, 60, 4, 31), 0) << "vocab " << vocab;
  }
}

TEST(Speculative, UnionMatchesPlainOnStories260K) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  Fixture f = load(path);
  drafter::Drafter d = make_drafter(f, 3, 0, 3);
  check_union_equals_plain(f, &d, 60, 3, 41);
}

TEST(Speculative, DrafterForAnotherTargetIsRefused) {
  std::string dir = test::temp_dir("spec-refuse");
  test::write_random_llama2c(dir + "/a.bin", 32, 64, 1, 4, 4, 50, 64, 1);
  test::write_random_llama2c(dir + "/b.bin", 32, 64, 1, 4, 4, 50, 64, 2);  // same shape, other weights
  Fixture a = load(dir + "/a.bin"), b = load(dir + "/b.bin");
  ASSERT_NE(a.fingerprint, b.fingerprint);
  drafter::DrafterConfig dc;
  std::string path = dir + "/drafter.safetensors";
  drafter::write_drafter(path, a.model->config(), a.fingerprint, dc,
                         drafter::random_drafter_tensors(a.model->config(), dc, 1), {});
  EXPECT_NO_THROW(drafter::Drafter::load(path, a.model->config(), a.fingerprint,
                                         kernels::WeightType::F32));
  try {
    drafter::Drafter::load(path, b.model->config(), b.fingerprint, kernels::WeightType::F32);
    FAIL() << "a drafter for another target was accepted";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(a.fingerprint), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.fingerprint), std::string::npos) << msg;
  }
}

TEST(Speculative, TruncatedOrCorruptDrafterGivesClearErrors) {
  std::string dir = test::temp_dir("spec-bad");
  test::write_random_llama2c(dir + "/a.bin", 32, 64, 1, 4, 4, 50, 64, 1);
  Fixture a = load(dir + "/a.bin");
  drafter::DrafterConfig dc;
  std::string path = dir + "/drafter.safetensors";
  drafter::write_drafter(path, a.model->config(), a.fingerprint, dc,
                         drafter::random_drafter_tensors(a.model->config(), dc, 1), {});
  std::string bytes = read_file(path);
  for (size_t cut : {size_t(4), size_t(20), bytes.size() / 2, bytes.size() - 1}) {
    std::string p = dir + "/cut.safetensors";
    write_file_atomic(p, bytes.substr(0, cut));
    EXPECT_THROW(drafter::Drafter::load(p, a.model->config(), a.fingerprint,
                                        kernels::WeightType::F32),
                 Error) << "cut at " << cut;
  }
  // A NaN in a module weight.
  auto t = drafter::random_drafter_tensors(a.model->config(), dc, 1);
  t["mtp.1.eh_proj.weight"][5] = std::numeric_limits<float>::quiet_NaN();
  drafter::write_drafter(path, a.model->config(), a.fingerprint, dc, t, {});
  EXPECT_THROW(drafter::Drafter::load(path, a.model->config(), a.fingerprint,
                                      kernels::WeightType::F32),
               FormatError);
}

}  // namespace
}  // namespace mtp::speculative
