// Gemma 4's assistant as the draft source "gemma4-assistant"
// (sources/assistant_source.h) on random Gemma 4 targets whose 8-token
// vocabulary makes random drafts right often enough to reach every depth:
// - greedy and coupled output == plain generation's, token for token, for
//   both head kinds and every draft length, through generate() and through
//   the engine with several slots (sequences admitted mid-way);
// - live ≡ teacher-forced: every live draft of every cycle — rejected ones
//   too, the whole chain is a function of the committed text — equals the
//   replay's (drafter::assistant_teacher_forced) in token and score, bit for
//   bit, after accept/reject cycles of every length;
// - rejection sampling drafts from the assistant's q (the centroid head's:
//   its selected tokens only) and runs to the end;
// - generations longer than the target's sliding ring read its K/V in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "assistant_util.h"
#include "core/error.h"
#include "drafter/assistant_runner.h"
#include "drafter/gemma4_assistant.h"
#include "model/loader.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/sources/assistant_source.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

struct Fixture {
  test::Target target;
  std::shared_ptr<const drafter::Gemma4Assistant> assistant;
};

Fixture make_fixture(bool ordered, uint64_t seed, int vocab = 8) {
  const test::RandomSpec t = test::assistant_target_spec(vocab);
  test::AssistantSpec a;
  a.ordered = ordered;
  a.centroids = 4;  // 2 tokens each
  a.top_k = 2;
  a.seed = seed;
  Fixture f;
  f.target = test::load_target(test::random_hf_checkpoint("g4a-spec", t));
  f.assistant = std::make_shared<const drafter::Gemma4Assistant>(drafter::Gemma4Assistant::load(
      test::random_assistant("g4a-spec-a", t, a), f.target.model->config()));
  return f;
}

struct Checked {
  long drafts = 0;        // live drafts compared with the replay
  long accepted[4] = {};  // cycles that accepted exactly a drafts (a = 0..3)
};

// Every cycle's drafts against the replay over the final sequence.
void check_live_equals_replay(const Fixture& f, const std::vector<int32_t>& seq,
                              const std::vector<CycleTrace>& trace, Checked& c) {
  const int steps = 4;
  const auto tf = drafter::assistant_teacher_forced(*f.target.model, *f.assistant, seq, 2, steps,
                                                    nullptr);
  for (const CycleTrace& cyc : trace) {
    const int N = cyc.n_committed;
    ASSERT_EQ(cyc.drafts.size(), cyc.scores.size());
    if (N < 2) {
      EXPECT_TRUE(cyc.drafts.empty()) << "a draft without a forwarded position";
      continue;
    }
    ASSERT_LE(cyc.drafts.size(), size_t(steps));
    for (size_t j = 0; j < cyc.drafts.size(); ++j) {
      const drafter::AssistantDraft& want = tf[size_t(N - 2)][j];
      ASSERT_EQ(cyc.drafts[j], want.token) << "N=" << N << " step " << j + 1;
      ASSERT_EQ(test::first_bit_difference({cyc.scores[j]}, {want.max_logit}), -1)
          << "N=" << N << " step " << j + 1 << ": score " << cyc.scores[j] << " vs "
          << want.max_logit;
      ++c.drafts;
    }
    if (cyc.accepted < 4) ++c.accepted[cyc.accepted];
  }
}

void expect_spec_equals_plain(const Fixture& f, const SamplerOptions& sampling, int n_new,
                              Checked& c, ThreadPool* pool = nullptr) {
  std::mt19937 rng(7);
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt = test::random_tokens(rng, 1 + int(rng() % 10), 8);
    GenerateOptions o;
    o.n_new = n_new;
    o.sampler = sampling;
    const GenerateResult plain = generate(*f.target.model, nullptr, prompt, o, pool);
    for (int k = 1; k <= 4; ++k) {
      SCOPED_TRACE(testing::Message() << "prompt " << i << " draft_k " << k);
      SpecOptions so;
      so.assistant = f.assistant;
      so.draft_k = k;
      so.record_trace = true;
      const GenerateResult spec = generate(*f.target.model, nullptr, prompt, o, pool, nullptr, so);
      ASSERT_EQ(spec.token_ids, plain.token_ids);
      ASSERT_TRUE(spec.stats.has_value());
      EXPECT_GT(spec.stats->sources.at(kAssistantSource).proposed, 0);
      if (sampling.greedy()) {
        std::vector<int32_t> seq = prompt;
        seq.insert(seq.end(), spec.token_ids.begin(), spec.token_ids.end());
        check_live_equals_replay(f, seq, spec.trace, c);
      }
    }
  }
}

TEST(AssistantSpec, FullHeadGreedyMatchesPlainLiveEqualsReplay) {
  const Fixture f = make_fixture(false, 31);
  Checked c;
  expect_spec_equals_plain(f, {}, 40, c);
  EXPECT_GT(c.drafts, 100);
  for (int a = 0; a < 4; ++a) EXPECT_GT(c.accepted[a], 0) << "no cycle accepted " << a;
}

TEST(AssistantSpec, CentroidHeadGreedyMatchesPlainLiveEqualsReplay) {
  const Fixture f = make_fixture(true, 22);
  Checked c;
  ThreadPool pool(2);  // the step's pool splits attention and clusters: same bits
  expect_spec_equals_plain(f, {}, 40, c, &pool);
  EXPECT_GT(c.drafts, 100);
  for (int a = 0; a < 4; ++a) EXPECT_GT(c.accepted[a], 0) << "no cycle accepted " << a;
}

TEST(AssistantSpec, CoupledSamplingMatchesPlain) {
  for (bool ordered : {false, true}) {
    const Fixture f = make_fixture(ordered, 23);
    SamplerOptions s;
    s.temperature = 0.8f;
    s.top_k = ordered ? 0 : 5;
    s.seed = 99;
    Checked c;
    expect_spec_equals_plain(f, s, 30, c);
  }
}

// Longer than the target's sliding ring (window 6 + 64 rows): every draft
// step reads its last window + 1 keys in place.
TEST(AssistantSpec, LongGenerationReadsTheRing) {
  const Fixture f = make_fixture(true, 24);
  const std::vector<int32_t> prompt = {2, 5, 1, 7};
  GenerateOptions o;
  o.n_new = 120;
  const GenerateResult plain = generate(*f.target.model, nullptr, prompt, o, nullptr);
  SpecOptions so;
  so.assistant = f.assistant;
  so.draft_k = 3;
  so.record_trace = true;
  const GenerateResult spec = generate(*f.target.model, nullptr, prompt, o, nullptr, nullptr, so);
  ASSERT_EQ(spec.token_ids, plain.token_ids);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), spec.token_ids.begin(), spec.token_ids.end());
  Checked c;
  check_live_equals_replay(f, seq, spec.trace, c);
  EXPECT_GT(c.drafts, 60);
}

TEST(AssistantSpec, RejectionSamplingDraftsFromTheSelectedTokens) {
  const Fixture f = make_fixture(true, 25, 16);  // 4 clusters of 4, 2 selected: 8 of 16
  SamplerOptions s;
  s.temperature = 1.0f;
  s.seed = 5;
  GenerateOptions o;
  o.n_new = 40;
  o.sampler = s;
  SpecOptions so;
  so.assistant = f.assistant;
  so.draft_k = 3;
  so.mode = SpecSampling::Rejection;
  so.record_trace = true;
  const GenerateResult r = generate(*f.target.model, nullptr, {2, 3, 4}, o, nullptr, nullptr, so);
  EXPECT_EQ(r.token_ids.size(), 40u);
  // Each draft is one of the tokens its row scored: replay the step and
  // check membership (the q of a draft: softmax over those, others -inf).
  drafter::AssistantRunner runner(*f.target.model, *f.assistant);
  long checked = 0;
  std::vector<int32_t> seq = {2, 3, 4};
  seq.insert(seq.end(), r.token_ids.begin(), r.token_ids.end());
  const auto tf = drafter::assistant_teacher_forced(*f.target.model, *f.assistant, seq, 2, 1,
                                                    nullptr, true);
  for (const CycleTrace& cyc : r.trace) {
    if (cyc.drafts.empty() || cyc.n_committed < 2) continue;
    const auto& ids = tf[size_t(cyc.n_committed - 2)][0].ids;
    EXPECT_EQ(ids.size(), 8u);
    EXPECT_TRUE(std::binary_search(ids.begin(), ids.end(), cyc.drafts[0]))
        << "draft " << cyc.drafts[0] << " outside the selected clusters";
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

// The engine with three slots, sequences admitted mid-way: each output is
// its plain generation's and each sequence's drafts its own replay's (one
// assistant call per step for all of them).
TEST(AssistantSpec, SeveralSlotsMatchPlain) {
  const Fixture f = make_fixture(true, 26);
  SchedulerOptions so;
  so.parallel = 3;
  so.ctx = 96;
  so.assistant = f.assistant;
  so.draft_k = 3;
  so.adaptive = false;
  Scheduler s(*f.target.model, nullptr, nullptr, so, nullptr);
  std::mt19937 rng(3);
  std::vector<Request> rs;
  for (int i = 0; i < 7; ++i) {
    Request r;
    r.prompt = test::random_tokens(rng, 1 + int(rng() % 12), 8);
    r.n_new = 10 + int(rng() % 30);
    r.record_trace = true;
    if (i % 2) r.sampler = {.temperature = 0.7f, .seed = uint64_t(i)};
    rs.push_back(r);
  }
  std::map<uint64_t, size_t> of;
  size_t next = 0;
  for (; next < 3; ++next) of[s.submit(rs[next])] = next;
  std::map<size_t, std::shared_ptr<const SequenceResult>> done;
  while (s.step() || next < rs.size()) {
    if (next < rs.size()) of[s.submit(rs[next])] = next, ++next;
    for (const Event& e : s.take_events()) {
      if (e.kind == Event::Kind::Finish) done[of.at(e.id)] = e.result;
    }
  }
  for (const Event& e : s.take_events()) {
    if (e.kind == Event::Kind::Finish) done[of.at(e.id)] = e.result;
  }
  ASSERT_EQ(done.size(), rs.size());
  Checked c;
  for (size_t i = 0; i < rs.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    GenerateOptions o = test::options_of(rs[i]);
    const GenerateResult plain = generate(*f.target.model, nullptr, rs[i].prompt, o, nullptr);
    EXPECT_EQ(done[i]->token_ids, plain.token_ids);
    if (rs[i].sampler.greedy()) {
      std::vector<int32_t> seq = rs[i].prompt;
      seq.insert(seq.end(), plain.token_ids.begin(), plain.token_ids.end());
      check_live_equals_replay(f, seq, done[i]->trace, c);
    }
  }
  EXPECT_GT(c.drafts, 30);
}

TEST(AssistantSpec, NeedsAnAssistant) {
  const Fixture f = make_fixture(false, 27);
  SchedulerOptions so;
  so.sources = {kAssistantSource};
  EXPECT_THROW(Scheduler s(*f.target.model, nullptr, nullptr, so, nullptr), InputError);
  so.assistant = f.assistant;
  so.tree.kind = TreeOptions::Kind::Static;
  so.tree.widths = {2, 1};
  EXPECT_THROW(Scheduler s(*f.target.model, nullptr, nullptr, so, nullptr), InputError);
}

}  // namespace
}  // namespace mtp::speculative
