// The draft source "native-mtp" (sources/native_mtp_source.h): a Qwen3.5
// checkpoint's own MTP head drafting for its target. Its live drafts equal the
// independent reference head's (tests/qwen35_reference.h: the head run row by
// row over the reference trunk's post-norm hidden, vLLM's proposer rules) —
// after the prompt and again after more text was committed (the catch-up) —
// within the tolerance from the dimensions; a head fed the pre-norm hidden
// instead would be caught. Speculation with it equals plain generate()
// (greedy and coupled, one and several sequences per forward) and its live
// acceptance per depth is reported. A target without the head is refused.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "model_util.h"
#include "qwen35_reference.h"
#include "spec_fixture.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/sources/native_mtp_source.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

using test::Target;

test::RandomSpec head_spec(int vocab) {
  test::RandomSpec s = test::RandomSpec::for_arch(model::Arch::Qwen35);
  s.mtp = true;
  s.vocab = vocab;
  s.eos_ids = {2};
  return s;
}

// The reference head's drafts for committed tokens `toks` (N of them): rows
// p = 0 .. N-2 over the reference trunk's post-norm hidden (or its pre-norm
// one: the planted error), then K - 1 rows chained on the head's own output.
struct RefDrafts {
  std::vector<int32_t> tokens;
  std::vector<double> max_logit, margin;  // per draft: its top logit, top1 - top2
};
RefDrafts reference_drafts(const std::string& dir, const std::vector<int32_t>& toks, int K,
                           bool pre_norm = false) {
  const test::Q35Out trunk = test::q35_reference(dir, toks);
  test::Q35MtpReference head(dir);
  test::Q35Vec out, logits;
  const int N = int(toks.size());
  for (int p = 0; p <= N - 2; ++p) {
    head.row(toks[size_t(p) + 1], pre_norm ? trunk.hidden[size_t(p)] : trunk.post[size_t(p)], out,
             logits);
  }
  RefDrafts r;
  for (int k = 0; k < K; ++k) {
    std::vector<double> sorted = logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    r.tokens.push_back(t);
    r.max_logit.push_back(sorted[0]);
    r.margin.push_back(sorted[0] - sorted[1]);
    if (k + 1 < K) {
      const test::Q35Vec h = out;
      head.row(t, h, out, logits);
    }
  }
  return r;
}

// Live drafts of the source for `toks` in a one-sequence target session whose
// forwarded prefix grows from `first` tokens to all of them (two proposes: the
// second catches up on the text committed since the first).
struct LiveDrafts {
  std::vector<int32_t> tokens;
  std::vector<float> scores;
};
LiveDrafts live_drafts(const Target& t, const std::vector<int32_t>& toks, size_t first, int K) {
  TargetSession s(*t.model, 64, nullptr);
  NativeMtpSource src(*t.model, 1, 64, K);
  Sampler sampler{SamplerOptions{}};
  DraftTree tree;
  std::vector<float> scores;
  auto propose = [&](size_t n) {
    std::span<const int32_t> committed(toks.data(), n);
    s.prefill(committed.subspan(size_t(s.forwarded()), n - 1 - size_t(s.forwarded())), nullptr);
    ProposeJob j;
    j.committed = committed;
    j.target = &s;
    j.max_len = K;
    j.sampler = &sampler;
    j.out = &tree;
    j.scores = &scores;
    src.propose({&j, 1});
  };
  propose(first);
  propose(toks.size());
  return {tree.token, scores};
}

TEST(NativeMtpSource, LiveDraftsEqualTheReferenceHead) {
  const test::RandomSpec spec = head_spec(320);
  const std::string dir = test::random_hf_checkpoint("native-mtp-ref", spec);
  const Target t = test::load_target(dir);
  std::mt19937 rng(5);
  const int K = 3;
  // K: the longest reduction (2d for fc, ffn, 2·heads·hd); L: trunk + head.
  const double Kred = std::max({2.0 * spec.d_model, double(spec.ffn),
                                2.0 * spec.n_heads * spec.head_dim, 24.0});
  const int L = spec.n_layers + 1;
  int compared = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<int32_t> toks = test::random_tokens(rng, 14 + trial, spec.vocab);
    const LiveDrafts live = live_drafts(t, toks, 6, K);
    const RefDrafts ref = reference_drafts(dir, toks, K);
    ASSERT_EQ(live.tokens.size(), size_t(K));
    for (int k = 0; k < K; ++k) {
      SCOPED_TRACE(testing::Message() << "trial " << trial << " draft " << k);
      const double tol = test::fp32_forward_tolerance(Kred, L, std::abs(ref.max_logit[size_t(k)]));
      EXPECT_NEAR(live.scores[size_t(k)], ref.max_logit[size_t(k)], tol);
      // Tokens compared while the chain is the reference's (a draft
      // within the tolerance of a tie may go either way, and so the rest).
      if (ref.margin[size_t(k)] <= tol) break;
      EXPECT_EQ(live.tokens[size_t(k)], ref.tokens[size_t(k)]);
      ++compared;
      if (live.tokens[size_t(k)] != ref.tokens[size_t(k)]) break;
    }
    // The planted error: the head fed the trunk's pre-norm hidden.
    const RefDrafts wrong = reference_drafts(dir, toks, 1, true);
    const double tol = test::fp32_forward_tolerance(Kred, L, std::abs(wrong.max_logit[0]));
    EXPECT_GT(std::abs(live.scores[0] - wrong.max_logit[0]), tol) << "pre-norm hidden unseen";
  }
  EXPECT_GE(compared, 6) << "too few drafts clear of ties to compare";
  std::printf("  %d live drafts equal the reference head's\n", compared);
}

TEST(NativeMtpSource, TargetWithoutTheHeadIsRefused) {
  test::RandomSpec spec = head_spec(64);
  spec.mtp = false;
  const Target t = test::load_target(test::random_hf_checkpoint("native-mtp-none", spec));
  SchedulerOptions so;
  so.sources = {kNativeMtpSource};
  test::expect_error<InputError>([&] { Scheduler(*t.model, nullptr, nullptr, so, nullptr); },
                                 {"no native multi-token-prediction head", "mtp.*"});
}

std::vector<Request> head_requests(int n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<Request> rs;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.prompt = test::random_tokens(rng, 3 + int(rng() % 8), 12);
    r.n_new = 16 + int(rng() % 24);
    if (i % 2) {  // coupled sampling
      r.sampler.temperature = 0.8f;
      r.sampler.seed = 90 + uint64_t(i);
    }
    rs.push_back(r);
  }
  return rs;
}

TEST(NativeMtpSource, SpeculativeEqualsPlainGenerate) {
  // A 12-token vocabulary: the random head is right now and then.
  const Target t = test::load_target(test::random_hf_checkpoint("native-mtp-spec", head_spec(12)));
  for (int parallel : {1, 3}) {
    SCOPED_TRACE(fmt::format("parallel {}", parallel));
    SchedulerOptions so;
    so.parallel = parallel;
    so.ctx = 96;
    so.prefill_chunk = 4;
    so.adaptive = false;
    so.sources = {kNativeMtpSource};
    so.draft_k = 3;
    Scheduler s(*t.model, nullptr, nullptr, so, nullptr);
    const std::vector<Request> rs = head_requests(5, 40 + uint64_t(parallel));
    const test::SchedulerRun run = test::run_requests(s, rs);
    std::vector<long> drafted(3, 0), accepted(3, 0);
    for (size_t i = 0; i < rs.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      ASSERT_TRUE(run.results[i]);
      const SequenceResult& res = *run.results[i];
      const GenerateResult ref = test::plain_generate(t, rs[i], s.ctx());
      EXPECT_EQ(res.token_ids, ref.token_ids);
      EXPECT_EQ(res.finish_reason, ref.finish_reason);
      ASSERT_TRUE(res.stats.has_value());
      const auto it = res.stats->sources.find(kNativeMtpSource);
      if (it == res.stats->sources.end()) continue;
      for (size_t k = 0; k < 3 && k < it->second.drafted.size(); ++k) {
        drafted[k] += it->second.drafted[k];
        accepted[k] += it->second.accepted[k];
      }
    }
    EXPECT_GT(drafted[0], 0) << "the head never drafted";
    EXPECT_GT(accepted[0], 0) << "no draft of the head was accepted";
    std::printf("  native-mtp live acceptance by depth (parallel %d):", parallel);
    for (size_t k = 0; k < 3; ++k) std::printf(" %ld/%ld", accepted[k], drafted[k]);
    std::printf("\n");
  }
}

}  // namespace
}  // namespace mtp::speculative
