// The server engine's draft settings. With its budget on (`mtpspec serve`,
// as `mtpspec generate`), what the engine learned carries from one request to
// the next — a drafter below break-even (a random one on stories260K, which
// almost never guesses right) is verified in the first cycles and then only
// probed (verified every cycle, a random drafter ran at 0.68x plain on the
// memory-bound target: docs/lab/performance-history.md "A useless drafter
// alone"). Lookups (--lookup
// prompt,history) keep the output and learn from earlier requests, with one
// slot or several; --draft-p-min reaches the drafter.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "drafter/drafter.h"
#include "tokenizer/tokenizer.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "speculative/sources/history.h"
#include "serve/serve_util.h"
#include "speculative/scheduler/generate.h"
#include "test_util.h"

namespace mtp::serve {
namespace {

using namespace std::chrono_literals;

// Runs one request to its Done event.
Event run_request(Engine& e, const Request& r) {
  std::atomic<bool> done{false};
  Event out;
  e.submit(r, [&](const Event& ev) {
    if (ev.type != Event::Type::Done) return;
    out = ev;
    done = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  while (!done && std::chrono::steady_clock::now() - t0 < 120s) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(done) << "no Done event in 120 s";
  return out;
}

TEST(ServeEngine, TheBudgetStopsAUselessDrafterAcrossRequests) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  model::LoadedModel lm = model::load_model(path, {});
  const std::string fingerprint = model::target_fingerprint(lm, /*use_cache=*/false);
  std::unique_ptr<io::Tokenizer> tok = io::load_tokenizer(lm.tokenizer);
  model::Model m(std::move(lm));
  drafter::DrafterConfig dc;
  dc.K = 3;
  drafter::Drafter d = drafter::Drafter::from_tensors(
      m.config(), fingerprint, dc, drafter::random_drafter_tensors(m.config(), dc, 5),
      {{"kind", "test"}}, DType::F32, kernels::WeightType::F32);
  ThreadPool pool(1);
  std::unique_ptr<Engine> engine =
      test::make_engine(/*batched=*/false, m, *tok, &pool, &d, 3, "stories260K", 512, 1);

  const char* prompts[] = {"Once upon a time", "Tom had a red ball", "The sun was shining"};
  long verified_last = -1, tokens_last = 0;
  for (const char* p : prompts) {
    Request r;
    r.prompt = tok->encode(p, true);
    r.max_tokens = 200;
    const Event done = run_request(*engine, r);
    ASSERT_EQ(done.error, "");
    ASSERT_TRUE(done.stats.has_value()) << "no speculation statistics";
    // Lossless whatever the gate chose: plain generate's tokens.
    speculative::GenerateOptions o;
    o.n_new = 200;
    o.ctx = 512;
    const auto ref = speculative::generate(m, tok.get(), r.prompt, o, &pool);
    EXPECT_EQ(done.completion_tokens, int(ref.token_ids.size())) << p;
    // Cycles that verified a draft (position 0 drafted), gated or not.
    ASSERT_FALSE(done.stats->drafted.empty());
    verified_last = done.stats->drafted[0];
    tokens_last = done.completion_tokens;
  }
  // The third request: probes only (one per 8 steps without a draft; the
  // pooled acceptance came from the first two), not a verify every cycle.
  ASSERT_GT(tokens_last, 64) << "the third request ended early";
  EXPECT_LE(verified_last, tokens_last / 8) << "the useless drafter was verified " << verified_last
                                           << " times in " << tokens_last << " tokens";
  engine->shutdown(false);
}

struct Stories {
  model::Model m;
  std::unique_ptr<io::Tokenizer> tok;
  std::string fingerprint;
};

std::unique_ptr<Stories> load_stories(const std::string& path) {
  model::LoadedModel lm = model::load_model(path, {});
  const std::string fp = model::target_fingerprint(lm, /*use_cache=*/false);
  std::unique_ptr<io::Tokenizer> tok = io::load_tokenizer(lm.tokenizer);
  return std::make_unique<Stories>(Stories{model::Model(std::move(lm)), std::move(tok), fp});
}

std::vector<int32_t> plain_tokens(const Stories& s, const std::vector<int32_t>& prompt, int n,
                                  ThreadPool* pool) {
  speculative::GenerateOptions o;
  o.n_new = n;
  o.ctx = 512;
  return speculative::generate(s.m, s.tok.get(), prompt, o, pool).token_ids;
}

// No drafter, lookups only, in both engines: every output is plain
// generate's; the second time a prompt is asked, history (fed by the first
// request) proposes the completion it gave then, and most of it is accepted.
// Independent of timing in both engines: the batched one runs without its
// cost budget (adaptive off) and the serial one without the live-gain gate
// (gate off, as --no-gate) and with a fixed verify cost instead of one timed
// at start, so the history's proposals are verified whatever this machine's
// m(q) is. (Gated, the serial half depended on those timings and failed once.)
TEST(ServeEngines, LookupsKeepTheOutputAndHistoryLearnsFromEarlierRequests) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  std::unique_ptr<Stories> s = load_stories(path);
  ThreadPool pool(1);
  for (bool batched : {false, true}) {
    SCOPED_TRACE(batched ? "two slots" : "one slot");
    EngineInfo info;
    info.model_id = "stories260K";
    info.ctx = 512;
    // The budget off in both (a fixed policy: the history's proposals are
    // verified whatever this machine's m(q) is), one slot or two.
    speculative::SchedulerOptions sched;
    sched.parallel = batched ? 2 : 1;
    sched.ctx = 512;
    sched.adaptive = false;
    sched.sources = {speculative::kPromptSource, speculative::kHistorySource};
    sched.history = std::make_shared<speculative::HistoryStore>(4, size_t(1) << 20);
    const speculative::HistoryStore* history = sched.history.get();
    std::unique_ptr<Engine> engine = make_engine(s->m, *s->tok, &pool, nullptr, info, sched);
    Request r;
    r.prompt = s->tok->encode("Once upon a time", true);
    r.max_tokens = 120;
    const std::vector<int32_t> plain = plain_tokens(*s, r.prompt, 120, &pool);
    long history_accepted[2] = {0, 0};
    for (int round = 0; round < 2; ++round) {
      const Event done = run_request(*engine, r);
      ASSERT_EQ(done.error, "");
      EXPECT_EQ(done.completion_tokens, int(plain.size())) << "round " << round;
      ASSERT_TRUE(done.stats.has_value());
      const auto it = done.stats->sources.find("history");
      if (it != done.stats->sources.end()) {
        for (long a : it->second.accepted) history_accepted[round] += a;
      }
      EXPECT_EQ(history->documents(), size_t(round + 1)) << "the request's output was not stored";
    }
    EXPECT_EQ(history_accepted[0], 0) << "history had nothing before the first request";
    EXPECT_GE(history_accepted[1], long(plain.size()) / 2)
        << "the second, identical request did not reuse the first one's output";
    engine->shutdown(false);
  }
}

// --draft-p-min 1 stops every draft (no module is that sure): the setting
// reaches the drafter, with one slot or several.
TEST(ServeEngines, DraftPMinReachesTheDrafter) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  std::unique_ptr<Stories> s = load_stories(path);
  drafter::DrafterConfig dc;
  dc.K = 2;
  drafter::Drafter d = drafter::Drafter::from_tensors(
      s->m.config(), s->fingerprint, dc, drafter::random_drafter_tensors(s->m.config(), dc, 3),
      {{"kind", "test"}}, DType::F32, kernels::WeightType::F32);
  ThreadPool pool(1);
  for (bool batched : {false, true}) {
    for (float p_min : {0.f, 1.f}) {
      EngineInfo info;
      info.model_id = "stories260K";
      info.ctx = 512;
      info.draft_p_min = p_min;
      speculative::SchedulerOptions sched;
      sched.parallel = batched ? 2 : 1;
      sched.ctx = 512;
      sched.draft_k = 2;
      sched.adaptive = false;  // draft every step unless p-min stops it
      std::unique_ptr<Engine> engine = make_engine(s->m, *s->tok, &pool, &d, info, sched);
      // What /v1/models reports (the batched engine said no drafter, K 0).
      EXPECT_TRUE(engine->info().has_drafter) << (batched ? "batched" : "serial");
      EXPECT_EQ(engine->info().draft_k, 2) << (batched ? "batched" : "serial");
      Request r;
      r.prompt = s->tok->encode("Lily went to the park", true);
      r.max_tokens = 40;
      const Event done = run_request(*engine, r);
      ASSERT_EQ(done.error, "");
      ASSERT_TRUE(done.stats.has_value());
      const long drafted = done.stats->drafted.empty() ? 0 : done.stats->drafted[0];
      if (p_min == 0.f) EXPECT_GT(drafted, 10) << (batched ? "batched" : "serial");
      else EXPECT_EQ(drafted, 0) << (batched ? "batched" : "serial") << ": --draft-p-min 1 drafted";
      engine->shutdown(false);
    }
  }
}

}  // namespace
}  // namespace mtp::serve
