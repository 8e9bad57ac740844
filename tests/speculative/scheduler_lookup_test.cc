// The engine's lookup sources (scheduler.h, sources/lookup_sources.cc): prompt lookup per
// sequence and a shared history store, beside the MTP drafter or alone. Each
// sequence's tokens still equal plain generate()'s (greedy and coupled T > 0,
// several sequences per forward, with and without the cost budget); lookups
// are verified and accepted where the text repeats; the history store learns
// every finished sequence and no cancelled one; an arm learns the depths past
// the ones the budget verified, as the text reaches them.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/policy/source_arms.h"
#include "speculative/sources/lookup.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

using test::Target;

// A random Llama over 12 tokens: its greedy continuations fall into loops, so
// a prompt lookup is often right (and a random drafter sometimes).
Target looping_target(uint64_t seed) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 12;
  spec.eos_ids = {2};
  spec.seed = seed;
  return test::load_target(test::random_hf_checkpoint("sched_lookup", spec));
}

std::vector<Request> requests(int n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<Request> rs;
  for (int i = 0; i < n; ++i) {
    Request r;
    // A prompt that repeats itself: something for the prompt lookup to find.
    std::vector<int32_t> part = test::random_tokens(rng, 2 + int(rng() % 6), 12);
    for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), part.begin(), part.end());
    r.n_new = 20 + int(rng() % 40);
    if (i % 2) {
      r.sampler.temperature = 0.7f;
      r.sampler.seed = 50 + uint64_t(i);
    }
    rs.push_back(r);
  }
  return rs;
}

struct LookupObserved {
  std::map<uint64_t, std::shared_ptr<const SequenceResult>> results;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  long lookup_tokens = 0;  // Token events drafted by a lookup
};

LookupObserved run(Scheduler& s, const std::vector<Request>& rs, std::vector<uint64_t>& ids) {
  LookupObserved out;
  for (const Request& r : rs) ids.push_back(s.submit(r));
  auto collect = [&] {
    for (const Event& e : s.take_events()) {
      if (e.kind == Event::Kind::Finish) {
        out.results[e.id] = e.result;
        continue;
      }
      out.tokens[e.id].push_back(e.token);
      if (e.drafted && !e.source.is(kMtpSource)) {
        EXPECT_TRUE(e.source.is(kPromptSource) || e.source.is(kHistorySource));
        ++out.lookup_tokens;
      }
    }
  };
  while (s.step()) collect();
  collect();
  return out;
}

GenerateResult plain(const Target& t, const Request& r, int ctx) {
  GenerateOptions go = test::options_of(r);
  go.ctx = ctx;
  return generate(*t.model, nullptr, r.prompt, go, nullptr, nullptr, SpecOptions{});
}

TEST(SchedulerLookups, OutputEqualsPlainGenerateAndLookupsAreAccepted) {
  Target t = looping_target(11);
  drafter::Drafter d = test::random_drafter(t, 3, 4);
  for (bool with_drafter : {false, true}) {
    for (bool adaptive : {false, true}) {
      for (int parallel : {1, 3}) {
        SCOPED_TRACE(fmt::format("drafter {} adaptive {} parallel {}", with_drafter, adaptive,
                                 parallel));
        SchedulerOptions so;
        so.parallel = parallel;
        so.ctx = 128;
        so.prefill_chunk = 5;
        so.adaptive = adaptive;
        if (with_drafter) so.sources.push_back(kMtpSource);
        so.sources.push_back(kPromptSource);
        so.sources.push_back(kHistorySource);
        so.history = std::make_shared<HistoryStore>(4, size_t(1) << 20);
        so.lookup.max_draft = 6;
        Scheduler s(*t.model, nullptr, with_drafter ? &d : nullptr, so, nullptr);
        const std::vector<Request> rs = requests(6, 3 + uint64_t(parallel));
        std::vector<uint64_t> ids;
        LookupObserved r = run(s, rs, ids);
        long accepted = 0;
        size_t with_output = 0;
        for (size_t i = 0; i < rs.size(); ++i) {
          SCOPED_TRACE("request " + std::to_string(i));
          ASSERT_TRUE(r.results.count(ids[i]));
          const SequenceResult& res = *r.results[ids[i]];
          const GenerateResult ref = plain(t, rs[i], s.ctx());
          EXPECT_EQ(res.token_ids, ref.token_ids);
          EXPECT_EQ(res.finish_reason, ref.finish_reason);
          EXPECT_EQ(r.tokens[ids[i]], res.token_ids);
          ASSERT_TRUE(res.stats.has_value()) << "a speculating sequence without stats";
          with_output += res.token_ids.empty() ? 0 : 1;
          for (const char* src : {"prompt", "history"}) {
            const auto it = res.stats->sources.find(src);
            if (it != res.stats->sources.end()) accepted += it->second.accepted_total();
          }
        }
        // Every finished sequence that generated something was stored (none
        // was cancelled).
        EXPECT_EQ(so.history->documents(), with_output);
        if (!adaptive && !with_drafter) {
          // Without the budget every proposal is verified: the looping
          // target's repeats must be found and accepted.
          EXPECT_GT(accepted, 0) << "no lookup draft was ever accepted";
          EXPECT_GT(r.lookup_tokens, 0) << "no token event says a lookup drafted it";
        }
        EXPECT_LE(r.lookup_tokens, accepted);
      }
    }
  }
}

// A cancelled sequence is not learnt; a finished one is, as prompt + output.
TEST(SchedulerLookups, HistoryLearnsFinishedSequencesOnly) {
  Target t = looping_target(12);
  SchedulerOptions so;
  so.parallel = 2;
  so.ctx = 96;
  so.adaptive = false;
  so.sources = {kHistorySource};
  so.history = std::make_shared<HistoryStore>(4, size_t(1) << 20);
  Scheduler s(*t.model, nullptr, nullptr, so, nullptr);
  std::vector<Request> rs = requests(2, 9);
  const uint64_t a = s.submit(rs[0]);
  const uint64_t b = s.submit(rs[1]);
  s.step();
  EXPECT_TRUE(s.cancel(b));
  std::shared_ptr<const SequenceResult> done;
  while (s.step()) {
    for (const Event& e : s.take_events()) {
      if (e.kind == Event::Kind::Finish && e.id == a) done = e.result;
    }
  }
  for (const Event& e : s.take_events()) {
    if (e.kind == Event::Kind::Finish && e.id == a) done = e.result;
  }
  ASSERT_TRUE(done);
  ASSERT_EQ(so.history->documents(), 1u) << "the cancelled sequence was stored, or none was";
  std::vector<int32_t> doc = done->prompt_ids;
  doc.insert(doc.end(), done->token_ids.begin(), done->token_ids.end());
  EXPECT_EQ(so.history->docs().front(), doc);
}

// Lookup options are checked when the scheduler is made (not at the first step).
TEST(SchedulerLookups, BadLookupOptionsAreRefused) {
  Target t = looping_target(13);
  SchedulerOptions so;
  so.sources = {kPromptSource};
  so.lookup.max_draft = 0;
  EXPECT_THROW(Scheduler(*t.model, nullptr, nullptr, so, nullptr), InputError);
}

// A prompt lookup over a periodic text is right at every depth, but the
// budget verifies only 2 of its 8 drafts each step. Its arm must still learn
// that depths 3..8 are right: the drafts past the verified ones are judged as
// later steps commit the text. Judged only where verified or reached by the
// step's own tokens, depth 6 kept the prior's 0.5^6 and the budget never
// found the longer chain worth its rows.
TEST(SchedulerLookups, AnArmLearnsTheDepthsPastTheOnesVerified) {
  std::vector<int32_t> text;
  for (int i = 0; i < 200; ++i) text.push_back(int32_t(3 + i % 11));
  LookupOptions o;
  o.max_draft = 8;
  PromptLookup lookup(o);
  SeqProposals seq;
  SourceArms arms({o.ngram_max}, o.max_draft);
  std::vector<int32_t> committed(text.begin(), text.begin() + 30);
  int cls = -1;
  for (int step = 0; step < 20; ++step) {
    const size_t before = committed.size();
    SeqProposals::Proposal prop;
    lookup.propose(committed, 8, prop.tokens);
    prop.cls = lookup.last_class();
    seq.proposals().assign(1, prop);
    seq.choose(arms, 8);
    ASSERT_EQ(seq.best(), 0);
    const auto& p = seq.proposals()[0];
    ASSERT_EQ(p.tokens.size(), 8u);
    cls = p.cls;
    // Verified 2 drafts, both accepted, then the target's own token.
    committed.insert(committed.end(), text.begin() + long(before), text.begin() + long(before) + 3);
    seq.judge(arms, 0, 2, 2, committed, before);
  }
  const std::vector<double> est = arms.at(arms.arm(0, cls)).estimate(8, SourceArms::kPrior);
  EXPECT_GT(est[5], 0.5) << "depth 6 not learned past the verified depths";
  EXPECT_GT(est[7], 0.5);
}

}  // namespace
}  // namespace mtp::speculative
