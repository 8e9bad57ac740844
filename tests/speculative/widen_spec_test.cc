// A widened drafter on its widened target (drafter/widen_drafter.h):
// - every module's teacher-forced draft equals the original drafter's on the
//   original target, row for row (random HF Llama: bitwise logits too);
// - speculative generation on the widened target equals plain, and equals the
//   original's output with the same acceptance statistics;
// - stories260K: generate with the tokenizer found in the folder stops where
//   the original stops (BOS or EOS) with the same text;
// - a widened drafter names the widened target and is refused by the original.
#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "drafter/drafter.h"
#include "drafter/widen_drafter.h"
#include "tokenizer/tokenizer.h"
#include "model/fingerprint.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "model/widen.h"
#include "model_util.h"
#include "speculative/scheduler/generate.h"
#include "drafter/teacher_forced.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

using kernels::WeightType;

struct Pair {
  std::unique_ptr<model::Model> model;
  std::string fingerprint;
  std::unique_ptr<drafter::Drafter> drafter;
};

// Source target + random drafter, and their widening, loaded with `wt`.
struct Widened {
  Pair src, dst;
  std::string dst_dir;
};

Widened make(const std::string& src_path, const std::string& shape, int K, DType dt,
           uint64_t seed) {
  const WeightType wt = dt == DType::BF16 ? WeightType::BF16 : WeightType::F32;
  model::LoadedModel raw = model::load_model(src_path, {});
  const std::string src_fp = model::target_fingerprint(raw, false);
  drafter::DrafterConfig dc;
  dc.K = K;
  const std::string dpath = test::temp_dir("widen-drafter") + "/drafter.safetensors";
  drafter::write_drafter(dpath, raw.config, src_fp, dc,
                         drafter::random_drafter_tensors(raw.config, dc, seed), {{"kind", "test"}},
                         dt);
  model::WidenPlan plan =
      model::plan_widen(raw.config, model::parse_widen_shape(shape, raw.config), false);
  Widened s;
  s.dst_dir = test::temp_dir("widen-target");
  model::write_widened(raw, plan, dt, raw.tokenizer, s.dst_dir);
  model::LoadedModel probe;
  probe.path = s.dst_dir;
  probe.config = model::read_hf_config(s.dst_dir);
  const std::string dst_fp = model::target_fingerprint(probe, false);
  const std::string wpath = s.dst_dir + "/drafter.safetensors";
  drafter::widen_drafter(dpath, src_fp, plan, dt, dst_fp, wpath);
  auto load = [&](const std::string& path, const std::string& fp, const std::string& d) {
    Pair p;
    model::LoadOptions o;
    o.weights = wt;
    p.model = std::make_unique<model::Model>(model::load_model(path, o));
    p.fingerprint = fp;
    p.drafter = std::make_unique<drafter::Drafter>(
        drafter::Drafter::load(d, p.model->config(), fp, wt));
    return p;
  };
  s.src = load(src_path, src_fp, dpath);
  s.dst = load(s.dst_dir, dst_fp, wpath);
  EXPECT_EQ(model::target_fingerprint(s.dst.model->loaded(), false), dst_fp);
  EXPECT_THROW(drafter::Drafter::load(wpath, s.src.model->config(), src_fp, wt), Error);
  return s;
}

// Teacher-forced drafts equal on both; speculative == plain on the widened
// target, and equal to the original's output and statistics.
void check(const Widened& s, int n_new, int n_prompts, unsigned seed, bool bitwise_logits) {
  std::mt19937 rng(seed);
  const auto& c = s.src.model->config();
  for (int i = 0; i < n_prompts; ++i) {
    SCOPED_TRACE(testing::Message() << "prompt " << i);
    std::vector<int32_t> prompt = test::random_tokens(rng, 1 + int(rng() % 10), c.vocab);
    if (c.bos_id >= 0) prompt[0] = c.bos_id;
    GenerateOptions o;
    o.n_new = n_new;
    GenerateResult plain_src = generate(*s.src.model, nullptr, prompt, o, nullptr);
    GenerateResult plain_dst = generate(*s.dst.model, nullptr, prompt, o, nullptr);
    ASSERT_EQ(plain_src.token_ids, plain_dst.token_ids);
    ASSERT_EQ(plain_src.finish_reason, plain_dst.finish_reason);
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), plain_src.token_ids.begin(), plain_src.token_ids.end());
    drafter::TeacherForced a = drafter::teacher_forced(*s.src.model, *s.src.drafter, seq, nullptr);
    drafter::TeacherForced b = drafter::teacher_forced(*s.dst.model, *s.dst.drafter, seq, nullptr);
    ASSERT_EQ(a.argmax, b.argmax) << "a widened module drafts another token";
    if (bitwise_logits) EXPECT_EQ(a.max_logit, b.max_logit);
    for (int k = 1; k <= s.src.drafter->config().K; ++k) {
      SCOPED_TRACE(testing::Message() << "K=" << k);
      SpecOptions so;
      so.draft_k = k;
      so.drafter = s.src.drafter.get();
      GenerateResult spec_src = generate(*s.src.model, nullptr, prompt, o, nullptr, nullptr, so);
      so.drafter = s.dst.drafter.get();
      GenerateResult spec_dst = generate(*s.dst.model, nullptr, prompt, o, nullptr, nullptr, so);
      ASSERT_EQ(spec_dst.token_ids, plain_dst.token_ids);
      ASSERT_EQ(spec_dst.finish_reason, plain_dst.finish_reason);
      ASSERT_TRUE(spec_src.stats && spec_dst.stats);
      EXPECT_EQ(spec_src.stats->accepted, spec_dst.stats->accepted);
      EXPECT_EQ(spec_src.stats->drafted, spec_dst.stats->drafted);
      EXPECT_EQ(spec_src.stats->cycles, spec_dst.stats->cycles);
    }
  }
}

TEST(WidenSpec, RandomLlamaDrafterDraftsTheSameTokens) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 10;  // random drafts are accepted often enough to reach deep positions
  spec.eos_ids = {};
  const std::string src = test::random_hf_checkpoint("widen-spec", spec);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Widened s = make(src, "d_model=256,layers=4,ffn=192,heads=8,kv_heads=4", 3, dt, 4);
    check(s, 30, 4, 9, true);
  }
}

TEST(WidenSpec, Stories260KGeneratesTheSameTextAndStops) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  Widened s = make(path, "d_model=256,layers=7,ffn=1024,heads=32,kv_heads=16", 2, DType::F32, 5);
  check(s, 40, 3, 2, false);
  auto tok = io::load_tokenizer(s.dst.model->loaded().tokenizer);
  model::LoadedModel orig_tok_probe = model::load_model(path, {});
  auto tok0 = io::load_tokenizer(orig_tok_probe.tokenizer);
  for (const char* text : {"Once upon a time", "The little dog", "Lily"}) {
    SCOPED_TRACE(text);
    std::vector<int32_t> ids = tok0->encode(text, true);
    ASSERT_EQ(ids, tok->encode(text, true));
    GenerateOptions o;
    o.n_new = 400;  // long enough that stories end at EOS / BOS
    GenerateResult a = generate(*s.src.model, tok0.get(), ids, o, nullptr);
    SpecOptions so;
    so.drafter = s.dst.drafter.get();
    GenerateResult b = generate(*s.dst.model, tok.get(), ids, o, nullptr, nullptr, so);
    EXPECT_EQ(a.token_ids, b.token_ids);
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.finish_reason, b.finish_reason);
  }
}

}  // namespace
}  // namespace mtp::speculative
