// The engine's one policy (scheduler_plan.cc, policy/draft_budget.h,
// policy/source_arms.h) on scripted free sources registered here — one that
// proposes the target's own continuation, one that is never right, one right
// exactly in one evidence class — with a fixed m(q) (memory-bound-like: a
// verify row costs 5 % of a decode) so the choices do not depend on this
// machine: a useless source is judged but hardly verified, a right one is
// verified at length, the right one wins beside a useless one, evidence
// classes are judged apart, and what one sequence taught the engine carries
// to the next. Outputs stay plain generation's throughout.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "checkpoint_util.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/draft_source.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

// The plain outputs (prompt + continuation) the scripted sources know.
std::mutex g_mu;
std::vector<std::vector<int32_t>> g_truth;
int g_vocab = 12;

// The true continuation of `committed` (a prefix of one known sequence):
// up to n tokens.
std::vector<int32_t> truth_after(std::span<const int32_t> committed, int n) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (const auto& seq : g_truth) {
    if (seq.size() < committed.size() || !std::equal(committed.begin(), committed.end(), seq.begin())) {
      continue;
    }
    const size_t end = std::min(seq.size(), committed.size() + size_t(n));
    return {seq.begin() + long(committed.size()), seq.begin() + long(end)};
  }
  return {};
}

// kind: 0 right, 1 never right, 2 right exactly in evidence class 1 (runs of
// three proposals per class, by the committed length).
class Scripted final : public DraftSource {
 public:
  Scripted(const char* name, int kind) : name_(name), kind_(kind) {}
  const char* name() const override { return name_; }
  int max_len() const override { return 6; }
  int classes() const override { return 2; }
  void propose(std::span<ProposeJob> jobs) override {
    for (ProposeJob& j : jobs) {
      std::vector<int32_t> t = truth_after(j.committed, j.max_len);
      const int cls = int(j.committed.size() / 3 % 2);
      const bool wrong = kind_ == 1 || (kind_ == 2 && cls == 0);
      if (wrong) {
        for (int32_t& x : t) x = (x + 1) % g_vocab;
      }
      j.out->assign_chain(t, name_);
      j.evidence = kind_ == 2 ? cls : 0;
    }
  }

 private:
  const char* name_;
  int kind_;
};

const RegisterDraftSource kRight("right-test",
                                 [](const SourceContext&) { return std::make_unique<Scripted>("right-test", 0); });
const RegisterDraftSource kWrong("wrong-test",
                                 [](const SourceContext&) { return std::make_unique<Scripted>("wrong-test", 1); });
const RegisterDraftSource kClassy("classy-test",
                                  [](const SourceContext&) { return std::make_unique<Scripted>("classy-test", 2); });

struct PolicyRun {
  std::vector<SequenceResult> results;
  std::vector<CycleTrace> trace;
};

// Runs the prompts one after another on ONE engine with these sources
// (adaptive, fixed m(q)), checking each output against plain generation.
// row_cost: a verify row's price in decodes on the curve the engine starts
// from; learn: the engine follows the forwards it times (CostCurve::observe).
PolicyRun run_engine(const test::Target& t, const std::vector<std::string>& sources,
                     const std::vector<std::vector<int32_t>>& prompts, int n_new,
                     bool adaptive = true, double row_cost = 0.05, bool learn = false) {
  SchedulerOptions so;
  so.parallel = 1;
  so.ctx = 256;
  so.sources = sources;
  so.adaptive = adaptive;
  std::vector<std::pair<int, double>> pts;
  for (int q = 1; q <= 64; ++q) pts.push_back({q, 1e-3 * (1 + row_cost * (q - 1))});
  so.cost = CostCurve(pts);
  so.learn_costs = learn;
  PolicyRun out;
  so.trace = [&](const CycleTrace& c) { out.trace.push_back(c); };
  Scheduler engine(*t.model, nullptr, nullptr, so, nullptr);
  for (const auto& p : prompts) {
    GenerateOptions go;
    go.n_new = n_new;
    go.ctx = so.ctx;
    const GenerateResult r = generate(engine, p, go);
    const GenerateResult plain = generate(*t.model, nullptr, p, go, nullptr);
    EXPECT_EQ(r.token_ids, plain.token_ids);
    SequenceResult s;
    s.token_ids = r.token_ids;
    s.stats = r.stats;
    out.results.push_back(s);
  }
  return out;
}

long verified(const SequenceResult& r, const char* name) {
  if (!r.stats) return 0;
  const auto it = r.stats->sources.find(name);
  return it == r.stats->sources.end() ? 0 : it->second.verified();
}

class Policy : public ::testing::Test {
 protected:
  void SetUp() override {
    test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
    spec.vocab = g_vocab;
    spec.eos_ids = {};  // every generation runs its n_new tokens
    t_ = test::load_target(test::random_hf_checkpoint("policy", spec));
    std::mt19937 rng(3);
    std::lock_guard<std::mutex> lk(g_mu);
    g_truth.clear();
    for (int i = 0; i < 3; ++i) {
      prompts_.push_back(test::random_tokens(rng, 4 + i, g_vocab));
      GenerateOptions go;
      go.n_new = kNew;
      go.ctx = 256;
      std::vector<int32_t> seq = prompts_.back();
      for (int32_t x : generate(*t_.model, nullptr, prompts_.back(), go, nullptr).token_ids) {
        seq.push_back(x);
      }
      g_truth.push_back(seq);
    }
  }
  static constexpr int kNew = 96;
  test::Target t_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_F(Policy, AUselessSourceIsJudgedButHardlyVerified) {
  const PolicyRun budget = run_engine(t_, {"wrong-test"}, prompts_, kNew);
  const PolicyRun every = run_engine(t_, {"wrong-test"}, prompts_, kNew, /*adaptive=*/false);
  long v_budget = 0, v_every = 0;
  for (const auto& r : budget.results) v_budget += verified(r, "wrong-test");
  for (const auto& r : every.results) v_every += verified(r, "wrong-test");
  EXPECT_GT(v_every, 3 * kNew) << "without the budget every proposal is verified";
  // Its first proposals are tried (the prior), then it is judged only; the
  // later sequences start from what the first one taught the engine.
  EXPECT_LT(10 * v_budget, v_every) << "the budget kept verifying a source that is never right";
  EXPECT_LE(verified(budget.results[1], "wrong-test") + verified(budget.results[2], "wrong-test"), 2);
}

TEST_F(Policy, ARightSourceIsVerifiedAtLength) {
  const PolicyRun r = run_engine(t_, {"right-test"}, prompts_, kNew);
  for (const auto& s : r.results) {
    ASSERT_TRUE(s.stats.has_value());
    EXPECT_GT(s.stats->tokens_per_cycle(), 4.0) << "a source right at every depth verified short";
  }
}

TEST_F(Policy, TheRightSourceWinsBesideAUselessOne) {
  const PolicyRun r = run_engine(t_, {"wrong-test", "right-test"}, prompts_, kNew);
  long right = 0, wrong = 0;
  for (const auto& s : r.results) right += verified(s, "right-test"), wrong += verified(s, "wrong-test");
  EXPECT_GT(right, 10 * std::max(1L, wrong)) << "right " << right << ", wrong " << wrong;
}

TEST_F(Policy, EvidenceClassesAreJudgedApart) {
  const PolicyRun r = run_engine(t_, {"classy-test"}, prompts_, kNew);
  // After the first sequence (which explores both classes from the prior).
  long cls_seen[2] = {0, 0}, cls_verified[2] = {0, 0};
  for (const CycleTrace& c : r.trace) {
    if (c.id == 1) continue;
    for (const CycleTrace::Proposal& p : c.proposals) {
      if (std::string(p.source) != "classy-test" || p.tokens.empty()) continue;
      ++cls_seen[p.evidence];
      cls_verified[p.evidence] += !c.drafts.empty();
    }
  }
  ASSERT_GT(cls_seen[0], 10);
  ASSERT_GT(cls_seen[1], 10);
  EXPECT_GT(cls_verified[1], cls_seen[1] / 2) << "the right class was not verified";
  EXPECT_LE(cls_verified[0], 1) << "the wrong class kept being verified";
}

TEST_F(Policy, WhatOneSequenceTaughtCarriesToTheNext) {
  // The same prompt twice on one engine: the useless source's arm learned in
  // the first run, so the second verifies it less (a fresh engine would
  // repeat the first run's exploration).
  const std::vector<std::vector<int32_t>> twice = {prompts_[0], prompts_[0]};
  const PolicyRun r = run_engine(t_, {"wrong-test"}, twice, kNew);
  const long first = verified(r.results[0], "wrong-test"), second = verified(r.results[1], "wrong-test");
  EXPECT_GT(first, 0) << "the prior never let the source be tried";
  EXPECT_LT(second, first);
}

TEST_F(Policy, ARightSourceOutpricedByTheCurveIsProbedAUselessOneIsNot) {
  // A curve on which a verify row costs 3 decodes (as a start-up timing on a
  // busy host can read): no draft pays on it, and only verifies would teach
  // the live curve otherwise (CostCurve::observe). A source its arm judges
  // right is probed (one draft) after 8 steps without a verify; a source
  // judged useless never is. The curve is fixed here, so the counts do not
  // depend on this machine's timings.
  auto probes = [](const PolicyRun& r, const char* name) {
    long n = 0;
    for (const auto& s : r.results) {
      const auto it = s.stats->sources.find(name);
      if (it != s.stats->sources.end()) n += it->second.probes;
    }
    return n;
  };
  const PolicyRun right = run_engine(t_, {"right-test"}, prompts_, kNew, /*adaptive=*/true,
                                     /*row_cost=*/3.0);
  // One probe per 9 steps at most; each accepted probe commits 2 tokens.
  const long n_right = probes(right, "right-test");
  EXPECT_GE(n_right, 3 * (kNew / 10 - 2)) << "the outpriced right source was not probed";
  EXPECT_LE(n_right, 3 * (kNew / 9 + 1));
  EXPECT_EQ(verified(right.results[0], "right-test"), probes(PolicyRun{{right.results[0]}, {}}, "right-test"))
      << "on this curve only probes are verified";
  const PolicyRun wrong = run_engine(t_, {"wrong-test"}, prompts_, kNew, /*adaptive=*/true,
                                     /*row_cost=*/3.0);
  EXPECT_EQ(probes(wrong, "wrong-test"), 0) << "a source judged useless was probed";
}

}  // namespace
}  // namespace mtp::speculative
