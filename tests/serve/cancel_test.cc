// A client that disconnects before its non-streamed completion is ready
// cancels the request in the real engines (serial and continuous-batching):
// generation stops long before max_tokens, the slot is free again, and the
// next request is served in full.
//
// The target is a random in-memory model (model/random_model.h) big enough
// that 4000 tokens take seconds: what is tested is when generation stops, not
// which tokens it makes. The byte tokenizer has no EOS, so only max_tokens or
// a cancel can end a request.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "model/forward.h"
#include "model/random_model.h"
#include "serve/metrics.h"
#include "serve/serve_util.h"
#include "serve/server.h"

namespace mtp::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kCtx = 4096, kMaxTokens = 4000;

void check_cancel_on_disconnect(bool batched) {
  // d 512, 4 layers: about a millisecond a token on one core.
  model::Model m(model::random_model({"cancel", 512, 4, 8, 4, 1376, 259, kCtx},
                                     kernels::WeightType::F32, 7));
  test::ByteTokenizer tok(/*eos=*/false);
  ThreadPool pool(1);
  std::unique_ptr<Engine> engine =
      test::make_engine(batched, m, tok, &pool, nullptr, 0, "random", kCtx, 2);
  ServerOptions so;
  so.port = 0;
  Server server(*engine, tok, so);
  const int port = server.bind();
  std::thread th([&] { server.listen(); });
  auto metrics = [&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    auto r = c.Get("/metrics");
    return r ? r->body : std::string();
  };

  int fd = test::connect_loopback(port);
  ASSERT_GE(fd, 0);
  const json body = {{"prompt", "Once"}, {"max_tokens", kMaxTokens}, {"temperature", 0}};
  ASSERT_TRUE(test::send_all(fd, test::http_post("/v1/completions", body.dump())));
  std::this_thread::sleep_for(50ms);
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  // Any finish: a request that ran on would end with "length" (after seconds).
  const std::string m1 = test::poll_until(
      metrics,
      [](const std::string& t) { return t.find("mtpspec_requests_finished_total{") != t.npos; },
      60s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(test::metric(m1, "mtpspec_requests_finished_total{reason=\"cancelled\"}"), 1) << m1;
  EXPECT_EQ(test::metric(m1, "mtpspec_requests_cancelled_total{stream=\"false\"}"), 1) << m1;
  const double tokens = test::metric(m1, "mtpspec_tokens_generated_total");
  EXPECT_GE(tokens, 0) << m1;
  EXPECT_LT(tokens, kMaxTokens / 2) << "finished " << secs << " s after the client left";
  EXPECT_EQ(test::metric(m1, "mtpspec_running"), 0) << m1;

  // The engine serves the next request in full.
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto r = c.Post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 8},
                                          {"temperature", 0}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 8);
  server.stop();
  th.join();
}

// engine.h: a request leaves the gauges before its Done is delivered, so a
// /metrics scrape that counts it as finished never also counts it as running
// (the CI once saw running 1 beside finished 1). The Done callback lingers,
// which widens the window a late gauge update would leave open.
void check_gauges_before_done(bool batched) {
  model::Model m(model::random_model({"gauges", 64, 1, 2, 2, 128, 259, 256},
                                     kernels::WeightType::F32, 3));
  test::ByteTokenizer tok(/*eos=*/false);
  ThreadPool pool(1);
  std::unique_ptr<Engine> engine =
      test::make_engine(batched, m, tok, &pool, nullptr, 0, "random", 256, 2);
  std::atomic<bool> done{false};
  Request r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 4;
  engine->submit(r, [&](const Event& e) {
    if (e.type != Event::Type::Done) return;
    done = true;
    std::this_thread::sleep_for(200ms);
  });
  const auto t0 = std::chrono::steady_clock::now();
  while (!done && std::chrono::steady_clock::now() - t0 < 60s) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(done);
  EXPECT_EQ(engine->running(), 0u);
  EXPECT_EQ(engine->queue_depth(), 0u);
  engine->shutdown(false);
}

TEST(ServeGauges, SerialEngineDropsARequestBeforeItsDone) { check_gauges_before_done(false); }
TEST(ServeGauges, BatchedEngineDropsARequestBeforeItsDone) { check_gauges_before_done(true); }

// Metrics::prometheus copies the counters, then asks for the gauges outside
// its lock: a finish recorded while the gauges are read is not in this
// scrape (it would be, with the gauges read first), and the callback may
// take locks under which finished() is called without deadlocking.
TEST(ServeGauges, CountersAreReadBeforeTheGauges) {
  Metrics metrics;
  const std::string text = metrics.prometheus([&] {
    metrics.finished("stop", 5, nullptr);
    return Metrics::Gauges{0, 0};
  });
  EXPECT_EQ(text.find("mtpspec_requests_finished_total{"), std::string::npos) << text;
  EXPECT_EQ(test::metric(text, "mtpspec_tokens_generated_total"), 0) << text;
  const std::string after = metrics.prometheus([] { return Metrics::Gauges{}; });
  EXPECT_EQ(test::metric(after, "mtpspec_requests_finished_total{reason=\"stop\"}"), 1) << after;
}

TEST(ServeCancel, SerialEngineStopsANonStreamedRequestWhoseClientLeft) {
  check_cancel_on_disconnect(/*batched=*/false);
}

TEST(ServeCancel, BatchedEngineStopsANonStreamedRequestWhoseClientLeft) {
  check_cancel_on_disconnect(/*batched=*/true);
}

}  // namespace
}  // namespace mtp::serve
