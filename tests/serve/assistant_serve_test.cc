// The server's engine (`mtpspec serve --drafter ASSISTANT_DIR`) drafting with
// Gemma 4's assistant: each request's tokens equal plain generation's,
// greedy and coupled, with three slots, while the assistant's drafts are
// verified and some accepted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include "assistant_util.h"
#include "drafter/gemma4_assistant.h"
#include "model/loader.h"
#include "model_util.h"
#include "serve/engine.h"
#include "serve_util.h"
#include "speculative/scheduler/generate.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

TEST(AssistantServe, ServerEngineMatchesPlain) {
  const test::RandomSpec t = test::assistant_target_spec(8);
  test::AssistantSpec a;
  a.ordered = true;
  a.centroids = 4;
  a.top_k = 2;
  a.seed = 22;
  model::Model m(model::load_model(test::random_hf_checkpoint("g4a-serve", t), {}));
  auto assistant = std::make_shared<const drafter::Gemma4Assistant>(
      drafter::Gemma4Assistant::load(test::random_assistant("g4a-serve-a", t, a), m.config()));
  test::ByteTokenizer tok(/*eos=*/false);
  SchedulerOptions so;
  so.parallel = 3;
  so.ctx = 128;
  so.adaptive = false;
  so.assistant = assistant;
  so.draft_k = 3;
  serve::EngineInfo info;
  info.model_id = "random-gemma4";
  std::unique_ptr<serve::Engine> engine = serve::make_engine(m, tok, nullptr, nullptr, info, so);
  EXPECT_EQ(engine->info().sources, std::vector<std::string>{kAssistantSource});
  std::mt19937 rng(4);
  long verified = 0;
  for (int i = 0; i < 5; ++i) {
    serve::Request r;
    r.prompt = test::random_tokens(rng, 2 + int(rng() % 8), 8);
    r.max_tokens = 30;
    if (i % 2) r.sampling = {.temperature = 0.9f, .seed = uint64_t(40 + i)};
    GenerateOptions o;
    o.n_new = r.max_tokens;
    o.sampler = r.sampling;
    const std::vector<int32_t> plain = generate(m, nullptr, r.prompt, o, nullptr).token_ids;
    std::mutex mu;
    std::vector<int32_t> got;
    std::atomic<bool> done{false};
    long v = 0;
    engine->submit(r, [&](const serve::Event& e) {
      std::lock_guard<std::mutex> lk(mu);
      if (e.type == serve::Event::Type::Token && e.token >= 0) got.push_back(e.token);
      if (e.type == serve::Event::Type::Done) {
        if (e.stats && e.stats->sources.count(kAssistantSource)) {
          v = e.stats->sources.at(kAssistantSource).verified();
        }
        done = true;
      }
    });
    for (int w = 0; w < 6000 && !done; ++w) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(done) << "no Done event from the server engine";
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(got, plain) << "request " << i;
    verified += v;
  }
  EXPECT_GT(verified, 20) << "the assistant's drafts were never verified";
  engine->shutdown(false);
}

}  // namespace
}  // namespace mtp::speculative
