// Speculation on a hybrid recurrent target (Qwen3.5: Gated DeltaNet layers
// beside gated full attention): with the prompt-lookup and history sources,
// and with a K-module drafter, every sequence's tokens equal plain
// generate()'s — greedy and coupled sampling, one and several sequences per
// forward — although every rejection rolls the recurrent state back (the
// cache's snapshot and replay, model/kv_cache.h). Draft trees are refused for
// such a target, naming why.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/sources/lookup.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

using test::Target;

// A random Qwen3.5 over 12 tokens: its greedy continuations fall into loops,
// so prompt lookups are often right and rejections frequent too.
Target looping_q35(uint64_t seed) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Qwen35);
  spec.vocab = 12;
  spec.eos_ids = {2};
  spec.seed = seed;
  return test::load_target(test::random_hf_checkpoint("q35_spec", spec));
}

std::vector<Request> q35_requests(int n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<Request> rs;
  for (int i = 0; i < n; ++i) {
    Request r;
    std::vector<int32_t> part = test::random_tokens(rng, 2 + int(rng() % 5), 12);
    for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), part.begin(), part.end());
    r.n_new = 16 + int(rng() % 24);
    if (i % 2) {  // coupled sampling
      r.sampler.temperature = 0.8f;
      r.sampler.seed = 70 + uint64_t(i);
    }
    rs.push_back(r);
  }
  return rs;
}

// Returns the rejected draft tokens' count over all requests.
long expect_equals_plain(const Target& t, const drafter::Drafter* d, bool lookups, int parallel) {
  SchedulerOptions so;
  so.parallel = parallel;
  so.ctx = 96;
  so.prefill_chunk = 5;
  so.adaptive = false;  // verify every proposal: many rollbacks
  if (d) so.sources.push_back(kMtpSource);
  if (lookups) {
    so.sources.push_back(kPromptSource);
    so.sources.push_back(kHistorySource);
    so.history = std::make_shared<HistoryStore>(4, size_t(1) << 20);
    so.lookup.max_draft = 5;
  }
  Scheduler s(*t.model, nullptr, d, so, nullptr);
  const std::vector<Request> rs = q35_requests(5, 11 + uint64_t(parallel));
  const test::SchedulerRun r = test::run_requests(s, rs);
  long drafted = 0, accepted = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(r.results[i]);
    if (!r.results[i]) continue;
    const SequenceResult& res = *r.results[i];
    const GenerateResult ref = test::plain_generate(t, rs[i], s.ctx());
    EXPECT_EQ(res.token_ids, ref.token_ids);
    EXPECT_EQ(res.finish_reason, ref.finish_reason);
    if (!res.stats) continue;
    for (const auto& [name, st] : res.stats->sources) {
      drafted += st.verified();
      accepted += st.accepted_total();
    }
  }
  EXPECT_GT(accepted, 0) << "no draft was ever accepted";
  return drafted - accepted;
}

TEST(Qwen35Speculative, LookupSourcesEqualPlainGenerate) {
  const Target t = looping_q35(5);
  for (int parallel : {1, 3}) {
    SCOPED_TRACE(fmt::format("parallel {}", parallel));
    EXPECT_GT(expect_equals_plain(t, nullptr, true, parallel), 0) << "no draft was rejected";
  }
}

TEST(Qwen35Speculative, KModuleDrafterEqualsPlainGenerate) {
  const Target t = looping_q35(6);
  const drafter::Drafter d = test::random_drafter(t, 3, 8);
  for (int parallel : {1, 2}) {
    SCOPED_TRACE(fmt::format("parallel {}", parallel));
    EXPECT_GT(expect_equals_plain(t, &d, false, parallel), 0) << "no draft was rejected";
  }
}

TEST(Qwen35Speculative, DraftTreesAreRefused) {
  const Target t = looping_q35(7);
  const drafter::Drafter d = test::random_drafter(t, 2, 9);
  SchedulerOptions so;
  so.sources = {kMtpSource};
  so.tree = TreeOptions::parse("2,2");
  test::expect_error<InputError>([&] { Scheduler(*t.model, nullptr, &d, so, nullptr); },
                                 {"cannot verify draft trees", "recurrent"});
}

}  // namespace
}  // namespace mtp::speculative
