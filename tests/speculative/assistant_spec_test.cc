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
// - generations longer than the target's sliding ring read its K/V in place;
// - trees: output == plain, every node (rejected branches too) its replay's.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <span>

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
}

// The rows of a replay over committed seq[0 .. N) fed `path` (the tokens
// after the last committed one): step d + 1 fed path[0 .. d), as a fresh
// target cache and the runner give them — (argmax, largest score) per step.
std::vector<std::pair<int32_t, float>> replay_path(const Fixture& f, std::span<const int32_t> seq,
                                                   const std::vector<int32_t>& path) {
  const model::Model& m = *f.target.model;
  const int N = int(seq.size());
  model::KVCache kv = m.make_cache(1, N, N, 0);
  std::vector<model::Row> rows;
  for (int p = 0; p + 1 < N; ++p) rows.push_back({0, p, seq[size_t(p)]});
  const size_t d = size_t(m.config().d_model);
  std::vector<float> hidden(rows.size() * d), state(d), next(d);
  m.forward(rows, kv, {nullptr, nullptr, hidden.data()}, nullptr);
  m.final_norm(hidden.data() + size_t(N - 2) * d, 1, state.data());
  drafter::AssistantRunner runner(m, *f.assistant);
  std::vector<std::pair<int32_t, float>> out;
  for (size_t j = 0; j <= path.size(); ++j) {
    const drafter::AssistantInput in{0, N - 1, j == 0 ? seq[size_t(N - 1)] : path[j - 1],
                                     state.data()};
    runner.step({&in, 1}, kv, next.data(), nullptr);
    const drafter::AssistantScores s = runner.scores(0);
    const size_t best = size_t(std::max_element(s.logits, s.logits + s.n) - s.logits);
    out.push_back({s.token(best), s.logits[best]});
    state = next;
  }
  return out;
}

// Trees: output == plain for static and budget shapes, greedy and coupled;
// at temperature 0 every node of every verified tree — rejected branches
// included — carries the score of the replay fed its path (bit for bit),
// and each node's first child (the root's too) is that row's argmax.
TEST(AssistantSpec, TreesMatchPlainAndEveryNodeItsReplay) {
  for (bool ordered : {false, true}) {
    const Fixture f = make_fixture(ordered, 41);
    std::mt19937 rng(11);
    long nodes = 0, off_path = 0;
    for (const TreeOptions& shape : {TreeOptions::parse("2,2,1"), TreeOptions::with_budget(6)}) {
      for (int i = 0; i < 3; ++i) {
        SCOPED_TRACE(testing::Message() << (ordered ? "centroid " : "full ") << shape.describe()
                                        << " prompt " << i);
        const std::vector<int32_t> prompt = test::random_tokens(rng, 2 + int(rng() % 8), 8);
        GenerateOptions o;
        o.n_new = 30;
        if (i == 2) o.sampler = {.temperature = 0.9f, .seed = 4};
        SpecOptions so;
        so.assistant = f.assistant;
        so.draft_k = 3;
        so.tree = shape;
        so.record_trace = true;
        const GenerateResult plain = generate(*f.target.model, nullptr, prompt, o, nullptr);
        const GenerateResult spec = generate(*f.target.model, nullptr, prompt, o, nullptr, nullptr, so);
        ASSERT_EQ(spec.token_ids, plain.token_ids);
        if (!o.sampler.greedy()) continue;
        std::vector<int32_t> seq = prompt;
        seq.insert(seq.end(), spec.token_ids.begin(), spec.token_ids.end());
        for (const CycleTrace& cyc : spec.trace) {
          if (cyc.drafts.empty()) continue;
          const std::span<const int32_t> committed(seq.data(), size_t(cyc.n_committed));
          ASSERT_EQ(cyc.scores.size(), cyc.drafts.size());
          std::vector<uint8_t> accepted(cyc.drafts.size(), 0), first(cyc.drafts.size() + 1, 1);
          for (int32_t a : cyc.accepted_nodes) accepted[size_t(a)] = 1;
          for (size_t x = 0; x < cyc.drafts.size(); ++x) {
            std::vector<int32_t> path;  // x's ancestors, root first
            for (int p = cyc.parents[x]; p >= 0; p = cyc.parents[size_t(p)]) path.insert(path.begin(), cyc.drafts[size_t(p)]);
            const auto rows = replay_path(f, committed, path);
            ASSERT_EQ(test::first_bit_difference({cyc.scores[x]}, {rows.back().second}), -1)
                << "N=" << cyc.n_committed << " node " << x;
            const size_t parent_slot = size_t(cyc.parents[x] + 1);  // 0: the root
            if (first[parent_slot]) {
              EXPECT_EQ(cyc.drafts[x], rows.back().first) << "N=" << cyc.n_committed << " node " << x;
              first[parent_slot] = 0;
            }
            ++nodes;
            off_path += !accepted[x];
          }
        }
      }
    }
    EXPECT_GT(nodes, 60);
    EXPECT_GT(off_path, 10) << "no rejected branch was checked";
  }
}

}  // namespace
}  // namespace mtp::speculative
