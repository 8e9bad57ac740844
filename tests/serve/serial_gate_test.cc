// The serial engine (`mtpspec serve --serial`) gates its drafter as `mtpspec
// generate` does by default (speculative/gate.h), carrying what the gate
// learned from one request to the next: a drafter below break-even — here a
// random one on stories260K, which almost never guesses right — is verified
// in the first cycles of the first request and then only probed. Before, the
// serial engine verified it every cycle (a random drafter ran at 0.68x plain
// on the memory-bound target, docs/PERFORMANCE.md).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "drafter/drafter.h"
#include "io/tokenizer.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "serve/serve_util.h"
#include "speculative/generate.h"
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

TEST(ServeSerialEngine, GatesAUselessDrafterAcrossRequests) {
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
  // The third request: probes only (one per >= 16 cycles; the gate's state
  // came from the first two), not a verify every cycle.
  ASSERT_GT(tokens_last, 64) << "the third request ended early";
  EXPECT_LE(verified_last, tokens_last / 8) << "the useless drafter was verified " << verified_last
                                           << " times in " << tokens_last << " tokens";
  engine->shutdown(false);
}

}  // namespace
}  // namespace mtp::serve
