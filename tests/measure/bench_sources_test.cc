// bench --sources on a random target: every source's output equals plain
// (no flips, greedy and coupled), per-kind rows add up to "all", and a
// prompt's own earlier runs never feed its history datastore.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "drafter/drafter.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "checkpoint_util.h"
#include "model_util.h"
#include "measure/bench_sources.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

struct Target {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<drafter::Drafter> drafter;
};

Target small_target() {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 12;
  spec.eos_ids = {};
  const std::string dir = test::random_hf_checkpoint("bench-sources", spec);
  model::LoadedModel lm = model::load_model(dir, {});
  const std::string fp = model::target_fingerprint(lm, false);
  Target t;
  t.model = std::make_unique<model::Model>(std::move(lm));
  drafter::DrafterConfig dc;
  dc.K = 2;
  t.drafter = std::make_unique<drafter::Drafter>(drafter::Drafter::from_tensors(
      t.model->config(), fp, dc, drafter::random_drafter_tensors(t.model->config(), dc, 3), {},
      DType::F32, kernels::WeightType::F32));
  return t;
}

TEST(BenchSources, EverySourceMatchesPlainPerKind) {
  Target t = small_target();
  std::mt19937 rng(4);
  BenchInputs in;
  in.model = t.model.get();
  in.drafter = t.drafter.get();
  for (int i = 0; i < 4; ++i) in.prompts.push_back(test::random_tokens(rng, 6, 12));
  SourceBenchOptions o;
  o.sources = {"mtp", "mtp-nogate", "prompt", "history", "union"};
  o.kinds = {"quote", "free", "quote", ""};
  for (float temp : {0.f, 0.7f}) {
    in.sampling.temperature = temp;
    SourcesResult r = run_sources(in, o, 24, 1);
    ASSERT_EQ(r.kinds.size(), 3u);  // quote, free, all
    EXPECT_EQ(r.kinds[0].kind, "quote");
    EXPECT_EQ(r.kinds[0].prompts, 2);
    EXPECT_EQ(r.kinds[1].prompts, 2);  // "" counts as free
    EXPECT_EQ(r.kinds[2].kind, "all");
    for (const KindRuns& k : r.kinds) {
      for (const SourceRun& s : k.runs) EXPECT_EQ(s.flips, 0) << k.kind << " " << s.source;
    }
    for (size_t i = 0; i < o.sources.size(); ++i) {
      EXPECT_EQ(r.kinds[0].runs[i].stats.cycles + r.kinds[1].runs[i].stats.cycles,
                r.kinds[2].runs[i].stats.cycles);
    }
    EXPECT_TRUE(r.to_json()["kinds"]["all"]["sources"].contains("union"));
  }
  o.sources = {"nope"};
  EXPECT_THROW(run_sources(in, o, 4, 1), InputError);
}

TEST(BenchSources, APromptsOwnRunsNeverFeedItsHistory) {
  Target t = small_target();
  BenchInputs in;
  in.model = t.model.get();
  in.drafter = t.drafter.get();
  in.prompts = {{1, 2, 3, 4}};
  SourceBenchOptions o;
  o.sources = {"history"};
  o.kinds = {"free"};
  SourcesResult r = run_sources(in, o, 30, 3);
  // One prompt: no other prompt's outputs, no corpus — the datastore is empty.
  const auto& st = r.kinds.back().runs[0].stats;
  ASSERT_GT(st.cycles, 0);
  EXPECT_EQ(st.sources.count("history") ? st.sources.at("history").proposed : 0, 0);
  // With a second prompt, the first one's history is that prompt's output.
  in.prompts.push_back({1, 2, 3, 5});
  o.kinds.push_back("free");
  r = run_sources(in, o, 30, 1);
  EXPECT_GT(r.kinds.back().runs[0].stats.sources.at("history").proposed, 0);
}

}  // namespace
}  // namespace mtp::speculative
