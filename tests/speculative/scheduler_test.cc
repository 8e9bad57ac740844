// Continuous batching (scheduler.h): N sequences sharing each forward give
// exactly the tokens each gives alone through generate() — greedy and coupled
// T > 0, with and without the drafter, sequences that end early (EOS, n_new,
// context), are cancelled or are admitted mid-way — and the scheduler's
// invariants hold after every step (a slot holds exactly its own sequence's
// positions; a freed slot holds none).
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/scheduler.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

using test::Target;

Target small_target(uint64_t seed, std::vector<int32_t> eos = {2}) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 12;  // random drafts are right often enough to be accepted
  spec.eos_ids = std::move(eos);
  spec.seed = seed;
  return test::load_target(test::random_hf_checkpoint("sched", spec));
}

SamplerOptions coupled(float t, uint64_t seed) {
  SamplerOptions o;
  o.temperature = t;
  o.top_k = seed % 2 ? 5 : 0;
  o.seed = seed;
  return o;
}

// A mixed load: prompt lengths 1..30 (longer than the prefill chunk), n_new
// 0..40, greedy and coupled sampling, with and without the drafter.
std::vector<Request> mixed_requests(int n, int vocab, bool with_drafter, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<Request> rs;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.prompt = test::random_tokens(rng, 1 + int(rng() % 30), vocab);
    r.n_new = i == 3 ? 0 : 5 + int(rng() % 36);
    if (i % 3 != 0) r.sampler = coupled(0.6f + 0.2f * float(i % 4), 100 + uint64_t(i));
    r.speculate = with_drafter && i % 4 != 1;
    r.draft_k = with_drafter ? 1 + i % 3 : 0;
    rs.push_back(r);
  }
  return rs;
}

GenerateResult alone(const Target& t, const Request& r, int ctx, const drafter::Drafter* d) {
  GenerateOptions go = test::options_of(r);
  go.ctx = ctx;
  SpecOptions sp;
  if (d && r.speculate) {
    sp.drafter = d;
    sp.draft_k = r.draft_k;
  }
  return generate(*t.model, nullptr, r.prompt, go, nullptr, nullptr, sp);
}

// After every step: each occupied slot holds exactly committed - 1 positions
// of its own sequence (nothing of a rejected draft, nothing of another
// sequence); free slots hold none.
void check_slots(const Scheduler& s) {
  for (int i = 0; i < s.parallel(); ++i) {
    if (s.slot_id(i) == 0) {
      EXPECT_EQ(s.slot_length(i), 0) << "free slot " << i << " holds K/V";
    } else {
      EXPECT_EQ(s.slot_length(i), s.slot_committed(i) - 1) << "slot " << i;
    }
  }
}

struct SchedObserved {
  std::map<uint64_t, std::vector<int32_t>> tokens;  // from the Token events
  std::map<uint64_t, std::shared_ptr<const SequenceResult>> results;
  long accepted = 0;  // drafts accepted over all sequences (the counters)
  std::map<uint64_t, long> drafted;  // Token events with drafted = true
};

void collect(Scheduler& s, SchedObserved& run) {
  for (const Event& e : s.take_events()) {
    if (e.kind == Event::Kind::Token) {
      auto& v = run.tokens[e.id];
      EXPECT_EQ(e.index, int(v.size())) << "sequence " << e.id << ": token events out of order";
      v.push_back(e.token);
      if (e.drafted) {
        ++run.drafted[e.id];
        EXPECT_TRUE(e.source.is(kMtpSource));
        EXPECT_GE(e.source.module, 0);
      }
    } else {
      EXPECT_FALSE(run.results.count(e.id)) << "two Finish events for " << e.id;
      run.results[e.id] = e.result;
      long acc = 0;
      if (e.result->stats) {
        for (long a : e.result->stats->accepted) acc += a;
      }
      run.accepted += acc;
      // Every accepted draft is emitted as a drafted token, except those the
      // end of generation (n_new, EOS) cuts off in the last cycle (< K).
      const long k = e.result->stats ? long(e.result->stats->drafted.size()) : 0;
      EXPECT_LE(run.drafted[e.id], acc);
      EXPECT_GE(run.drafted[e.id], acc - k);
    }
  }
}

// Submits `first` requests, then the rest one per step (admitted mid-way).
SchedObserved run_all(Scheduler& s, const std::vector<Request>& rs, size_t first,
            std::vector<uint64_t>& ids) {
  SchedObserved run;
  size_t next = 0;
  for (; next < std::min(first, rs.size()); ++next) ids.push_back(s.submit(rs[next]));
  while (s.step() || next < rs.size()) {
    if (next < rs.size()) ids.push_back(s.submit(rs[next++]));
    check_slots(s);
    collect(s, run);
  }
  collect(s, run);
  return run;
}

void expect_identity(const Target& t, const drafter::Drafter* d, SchedulerOptions so,
                     const std::vector<Request>& rs, bool expect_accepts) {
  Scheduler s(*t.model, nullptr, d, so, nullptr);
  std::vector<uint64_t> ids;
  SchedObserved run = run_all(s, rs, 3, ids);
  ASSERT_EQ(ids.size(), rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    GenerateResult ref = alone(t, rs[i], s.ctx(), d);
    ASSERT_TRUE(run.results.count(ids[i])) << "no Finish event";
    const SequenceResult& r = *run.results[ids[i]];
    EXPECT_EQ(r.token_ids, ref.token_ids);
    EXPECT_EQ(r.finish_reason, ref.finish_reason);
    EXPECT_EQ(run.tokens[ids[i]], r.token_ids) << "Token events differ from the result";
  }
  if (expect_accepts) {
    EXPECT_GT(run.accepted, 0) << "no draft was ever accepted";
    long drafted = 0;
    for (const auto& [id, n] : run.drafted) drafted += n;
    EXPECT_GT(drafted, 0) << "no token event says it was drafted";
  }
  EXPECT_TRUE(s.idle());
}

TEST(Scheduler, ConcurrentSequencesEqualGenerateAlone) {
  Target t = small_target(3);
  drafter::Drafter d = test::random_drafter(t, 3, 5);
  for (bool adaptive : {false, true}) {
    for (int parallel : {1, 3, 8}) {
      SCOPED_TRACE("adaptive " + std::to_string(adaptive) + " parallel " +
                   std::to_string(parallel));
      SchedulerOptions so;
      so.parallel = parallel;
      so.ctx = 96;
      so.prefill_chunk = 7;  // prompts span several steps, beside decodes
      so.adaptive = adaptive;
      so.cost_reps = 1;
      expect_identity(t, &d, so, mixed_requests(10, 12, true, 7 + uint64_t(parallel)), !adaptive);
      expect_identity(t, nullptr, so, mixed_requests(6, 12, false, 9), false);
    }
  }
}

// The same identity must fail when rows of sequences mix: scheduling a
// deliberately wrong request for one sequence (another seed) is caught, so
// the comparison above sees per-sequence differences at all.
TEST(Scheduler, IdentityCheckSeesAChangedSequence) {
  Target t = small_target(3);
  SchedulerOptions so;
  so.parallel = 3;
  so.ctx = 96;
  std::vector<Request> rs = mixed_requests(4, 12, false, 21);
  Scheduler s(*t.model, nullptr, nullptr, so, nullptr);
  std::vector<Request> changed = rs;
  changed[1].sampler = coupled(1.f, 999);
  std::vector<uint64_t> ids;
  SchedObserved run = run_all(s, changed, 4, ids);
  EXPECT_NE(run.results[ids[1]]->token_ids, alone(t, rs[1], s.ctx(), nullptr).token_ids);
}

TEST(Scheduler, ContextLimitEndsWithContext) {
  Target t = small_target(4, {});
  drafter::Drafter d = test::random_drafter(t, 3, 6);
  for (const drafter::Drafter* dp : {static_cast<const drafter::Drafter*>(nullptr),
                                     static_cast<const drafter::Drafter*>(&d)}) {
    SchedulerOptions so;
    so.parallel = 2;
    so.ctx = 24;
    so.adaptive = false;
    Scheduler s(*t.model, nullptr, dp, so, nullptr);
    std::mt19937 rng(5);
    std::vector<Request> rs(2);
    for (Request& r : rs) {
      r.prompt = test::random_tokens(rng, 10, 12);
      r.n_new = 100;
    }
    std::vector<uint64_t> ids;
    SchedObserved run = run_all(s, rs, 2, ids);
    for (size_t i = 0; i < rs.size(); ++i) {
      const SequenceResult& r = *run.results[ids[i]];
      EXPECT_EQ(r.finish_reason, "context");
      EXPECT_EQ(r.prompt_ids.size() + r.token_ids.size(), size_t(so.ctx));
      EXPECT_EQ(r.token_ids, alone(t, rs[i], so.ctx, dp).token_ids);
    }
  }
}

TEST(Scheduler, CancelFreesTheSlotAndOthersAreUnaffected) {
  Target t = small_target(5, {});
  drafter::Drafter d = test::random_drafter(t, 2, 7);
  SchedulerOptions so;
  so.parallel = 2;
  so.ctx = 128;
  so.adaptive = false;
  Scheduler s(*t.model, nullptr, &d, so, nullptr);
  std::mt19937 rng(8);
  std::vector<Request> rs(4);
  for (Request& r : rs) {
    r.prompt = test::random_tokens(rng, 5, 12);
    r.n_new = 60;
    r.sampler = coupled(0.8f, 3);
  }
  std::vector<uint64_t> ids;
  for (const Request& r : rs) ids.push_back(s.submit(r));
  SchedObserved run;
  for (int i = 0; i < 4; ++i) s.step();
  collect(s, run);
  // ids[0] runs in a slot, ids[3] is still waiting.
  int slot0 = -1;
  for (int i = 0; i < s.parallel(); ++i) {
    if (s.slot_id(i) == ids[0]) slot0 = i;
  }
  ASSERT_GE(slot0, 0);
  ASSERT_GT(s.slot_length(slot0), 0);
  EXPECT_TRUE(s.cancel(ids[0]));
  EXPECT_TRUE(s.cancel(ids[3]));
  EXPECT_FALSE(s.cancel(ids[3])) << "cancelled twice";
  EXPECT_FALSE(s.cancel(12345));
  EXPECT_EQ(s.slot_id(slot0), 0u);
  EXPECT_EQ(s.slot_length(slot0), 0) << "cancel kept the slot's K/V";
  EXPECT_EQ(s.waiting(), 1u);  // ids[2] waits; ids[3] is gone
  collect(s, run);
  while (s.step()) {
    check_slots(s);
    collect(s, run);
  }
  collect(s, run);
  EXPECT_EQ(run.results[ids[0]]->finish_reason, "cancelled");
  EXPECT_EQ(run.results[ids[3]]->finish_reason, "cancelled");
  EXPECT_TRUE(run.results[ids[3]]->token_ids.empty());
  // The cancelled sequence's tokens are a prefix of its own output alone.
  std::vector<int32_t> full = alone(t, rs[0], so.ctx, &d).token_ids;
  const auto& part = run.results[ids[0]]->token_ids;
  ASSERT_LE(part.size(), full.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin()));
  for (int i : {1, 2}) {
    EXPECT_EQ(run.results[ids[size_t(i)]]->token_ids, alone(t, rs[size_t(i)], so.ctx, &d).token_ids);
  }
}

TEST(Scheduler, BadRequestsAreRefused) {
  Target t = small_target(6);
  drafter::Drafter d = test::random_drafter(t, 2, 7);
  SchedulerOptions so;
  so.parallel = 1;
  so.ctx = 16;
  Scheduler s(*t.model, nullptr, &d, so, nullptr);
  Request r;
  test::expect_error<InputError>([&] { s.submit(r); }, {"empty"});
  r.prompt.assign(16, 3);
  test::expect_error<InputError>([&] { s.submit(r); }, {"context is 16"});
  r.prompt = {3, 40};
  test::expect_error<InputError>([&] { s.submit(r); }, {"vocabulary"});
  r.prompt = {3};
  r.draft_k = 3;
  test::expect_error<InputError>([&] { s.submit(r); }, {"1..2"});
  EXPECT_TRUE(s.idle());
  // Slots that cannot fit in memory are refused before anything is allocated.
  SchedulerOptions huge = so;
  huge.parallel = 1 << 20;
  huge.ctx = 512;
  test::expect_error<InputError>([&] { Scheduler(*t.model, nullptr, &d, huge, nullptr); },
                                 {"1048576 sequences", "GiB"});
}

// Background thread: per-token callbacks in order, Finish last, outputs
// identical; callbacks may cancel.
TEST(Scheduler, BackgroundThreadDeliversEveryTokenInOrder) {
  Target t = small_target(7, {});
  drafter::Drafter d = test::random_drafter(t, 3, 9);
  SchedulerOptions so;
  so.parallel = 3;
  so.ctx = 96;
  so.cost_reps = 1;
  std::vector<Request> rs = mixed_requests(6, 12, true, 31);
  std::mutex mu;
  std::map<uint64_t, std::vector<int32_t>> toks;
  std::map<uint64_t, std::string> reason;
  std::vector<uint64_t> ids;
  uint64_t to_cancel = 0;
  BackgroundScheduler* bgp = nullptr;
  BackgroundScheduler bg(std::make_unique<Scheduler>(*t.model, nullptr, &d, so, nullptr),
                         [&](const Event& e) {
                           std::lock_guard lk(mu);
                           EXPECT_FALSE(reason.count(e.id)) << "event after Finish";
                           if (e.kind == Event::Kind::Finish) {
                             reason[e.id] = e.finish_reason;
                             return;
                           }
                           EXPECT_EQ(e.index, int(toks[e.id].size()));
                           toks[e.id].push_back(e.token);
                           // Cancelling from inside a callback is allowed.
                           if (e.id == to_cancel && e.index == 2) bgp->cancel(e.id);
                         });
  bgp = &bg;
  {
    std::lock_guard lk(mu);
    rs[5].n_new = 40;
    for (const Request& r : rs) ids.push_back(bg.submit(r));
    to_cancel = ids[5];
  }
  bg.wait_idle();
  EXPECT_EQ(bg.last_error(), "");
  std::lock_guard lk(mu);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(toks[ids[i]], alone(t, rs[i], 96, &d).token_ids) << "request " << i;
    EXPECT_EQ(reason[ids[i]], "length");
  }
  EXPECT_EQ(reason[ids[5]], "cancelled");
  EXPECT_GE(toks[ids[5]].size(), 3u);
  EXPECT_LT(toks[ids[5]].size(), 40u);
}

// stories260K with its tokenizer: text pieces, stop strings and EOS, greedy
// and coupled, against generate() alone.
// A drafter the budget prices out still drafts one token every few steps (a
// probe), so its estimate can recover when the text turns predictable: every
// sequence's drafter drafts at least once per 9 steps (kProbeEvery 8), even a
// useless one, and the output stays plain's.
TEST(Scheduler, APricedOutDrafterIsProbed) {
  Target t = small_target(5, {});
  drafter::Drafter d = test::random_drafter(t, 2, 9);
  SchedulerOptions so;
  so.parallel = 2;
  so.ctx = 160;
  so.cost_reps = 0;
  Scheduler s(*t.model, nullptr, &d, so, nullptr);
  std::vector<Request> rs = mixed_requests(2, 12, true, 31);
  for (Request& r : rs) r.n_new = 120, r.speculate = true, r.draft_k = 2;
  std::vector<uint64_t> ids;
  SchedObserved run = run_all(s, rs, 2, ids);
  for (size_t i = 0; i < rs.size(); ++i) {
    const SequenceResult& r = *run.results[ids[i]];
    EXPECT_EQ(r.token_ids, alone(t, rs[i], s.ctx(), nullptr).token_ids);
    ASSERT_TRUE(r.stats.has_value());
    EXPECT_GE(r.stats->drafted[0], r.stats->cycles / 9 - 1)
        << "sequence " << i << ": " << r.stats->drafted[0] << " drafts in " << r.stats->cycles
        << " steps";
  }
}

TEST(Scheduler, Stories260KTextAndStopsEqualGenerate) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(tok_path, "models/stories260K/tok512.bin");
  Target t = test::load_target(path);
  auto tok = io::load_tokenizer(tok_path);
  drafter::Drafter d = test::random_drafter(t, 3, 8);
  const char* prompts[] = {"Once upon a time", "The cat", "Lily went to the park and", ""};
  std::vector<Request> rs;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = tok->encode(prompts[i % 4], true);
    r.n_new = 30 + 10 * (i % 3);
    if (i % 2) r.sampler = coupled(0.8f, uint64_t(i));
    if (i == 2) r.stop = {"."};
    r.speculate = i % 3 != 0;
    rs.push_back(r);
  }
  SchedulerOptions so;
  so.parallel = 4;
  so.ctx = 128;
  so.cost_reps = 1;
  Scheduler s(*t.model, tok.get(), &d, so, nullptr);
  std::vector<uint64_t> ids;
  for (const Request& r : rs) ids.push_back(s.submit(r));
  std::map<uint64_t, std::string> pieces;
  std::map<uint64_t, std::shared_ptr<const SequenceResult>> res;
  while (s.step() || !s.idle()) {
    for (const Event& e : s.take_events()) {
      pieces[e.id] += e.piece;
      if (e.kind == Event::Kind::Finish) res[e.id] = e.result;
    }
  }
  for (const Event& e : s.take_events()) {
    pieces[e.id] += e.piece;
    if (e.kind == Event::Kind::Finish) res[e.id] = e.result;
  }
  for (size_t i = 0; i < rs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    GenerateOptions go = test::options_of(rs[i]);
    go.ctx = so.ctx;
    SpecOptions sp;
    if (rs[i].speculate) sp.drafter = &d;
    GenerateResult ref = generate(*t.model, tok.get(), rs[i].prompt, go, nullptr, nullptr, sp);
    EXPECT_EQ(res[ids[i]]->token_ids, ref.token_ids);
    EXPECT_EQ(res[ids[i]]->text, ref.text);
    EXPECT_EQ(res[ids[i]]->finish_reason, ref.finish_reason);
    EXPECT_EQ(pieces[ids[i]], ref.text) << "the pieces do not add up to the text";
  }
  EXPECT_EQ(res[ids[2]]->finish_reason, "stop");
}

}  // namespace
}  // namespace mtp::speculative
