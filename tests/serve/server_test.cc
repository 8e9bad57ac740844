// The HTTP layer over a scripted engine (tokens at a fixed pace, cancellable)
// and a byte tokenizer: authentication, limits, malformed bodies, the
// context check, streaming format, disconnects and slow clients.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "serve/serve_util.h"
#include "serve/server.h"

namespace mtp::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using test::ByteTokenizer;

// Emits "ab" repeated, one byte per token every `pace`, until max_tokens or cancel.
class FakeEngine : public Engine {
 public:
  explicit FakeEngine(std::chrono::milliseconds pace, int ctx = 64) : pace_(pace) {
    info_.model_id = "fake";
    info_.ctx = ctx;
  }
  ~FakeEngine() override { shutdown(true); }
  const EngineInfo& info() const override { return info_; }
  Handle submit(Request r, EventFn f) override {
    std::lock_guard<std::mutex> lk(mu_);
    const Handle h = ++next_;
    auto flag = std::make_shared<std::atomic<bool>>(false);
    flags_[h] = flag;
    ++running_;
    threads_.emplace_back([this, r, f, flag] {
      const int n = r.max_tokens > 0 ? r.max_tokens : info_.ctx - int(r.prompt.size());
      Event e;
      int i = 0;
      for (; i < n && !*flag; ++i) {
        std::this_thread::sleep_for(pace_);
        e.token = 3 + (i % 2 ? 'b' : 'a');
        e.text = i % 2 ? "b" : "a";
        e.origin.drafted = i % 3 == 1;
        f(e);
      }
      Event d;
      d.type = Event::Type::Done;
      d.finish_reason = *flag ? "cancelled" : "length";
      if (*flag) ++cancelled_;
      d.prompt_tokens = int(r.prompt.size());
      d.completion_tokens = i;
      --running_;
      f(d);
    });
    return h;
  }
  void cancel(Handle h) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (flags_.count(h)) *flags_[h] = true;
  }
  size_t queue_depth() const override { return 0; }
  size_t running() const override { return size_t(running_.load()); }
  void shutdown(bool) override {
    std::vector<std::thread> ts;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (auto& [h, f] : flags_) *f = true;
      ts.swap(threads_);
    }
    for (auto& t : ts) t.join();
  }
  std::atomic<int> cancelled_{0};

 private:
  std::chrono::milliseconds pace_;
  EngineInfo info_;
  std::mutex mu_;
  Handle next_ = 0;
  std::map<Handle, std::shared_ptr<std::atomic<bool>>> flags_;
  std::vector<std::thread> threads_;
  std::atomic<int> running_{0};
};

struct Running {
  explicit Running(ServerOptions o, std::chrono::milliseconds pace = 1ms, int ctx = 64)
      : engine(pace, ctx), server(engine, tok, [&] {
          o.port = 0;
          return o;
        }()) {
    port = server.bind();
    thread = std::thread([this] { server.listen(); });
  }
  ~Running() {
    server.stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    return c;
  }
  ByteTokenizer tok;
  FakeEngine engine;
  Server server;
  int port = 0;
  std::thread thread;
};

void expect_openai_error(const httplib::Result& r, int status) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status);
  json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
  for (const char* k : {"message", "type", "param", "code"}) {
    EXPECT_TRUE(j["error"].contains(k)) << k << " missing: " << r->body;
  }
}

TEST(Server, ApiKeyOnEveryRouteButHealthAndThePage) {
  ServerOptions o;
  o.api_key = "sekret";
  Running s(o);
  auto c = s.client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/")->status, 200);
  for (const char* path : {"/v1/models", "/metrics"}) {
    expect_openai_error(c.Get(path), 401);
    expect_openai_error(c.Get(path, {{"Authorization", "Bearer wrong"}}), 401);
    expect_openai_error(c.Get(path, {{"Authorization", "Bearer sekret2"}}), 401);
    EXPECT_EQ(c.Get(path, {{"Authorization", "Bearer sekret"}})->status, 200) << path;
  }
  expect_openai_error(c.Post("/v1/completions", R"({"prompt":"a"})", "application/json"), 401);
  auto ok = c.Post("/v1/completions", {{"Authorization", "Bearer sekret"}},
                   R"({"prompt":"a","max_tokens":2})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Server, BodyLimitMalformedJsonAndContext) {
  ServerOptions o;
  o.max_body = 1024;
  Running s(o);
  auto c = s.client();
  expect_openai_error(c.Post("/v1/completions", std::string(4096, ' ') + "{}", "application/json"),
                      413);
  expect_openai_error(c.Post("/v1/completions", "{\"prompt\":", "application/json"), 400);
  expect_openai_error(c.Post("/v1/chat/completions", R"({"messages":"hi"})", "application/json"),
                      400);
  // ctx 64: 70 bytes + BOS do not fit.
  auto r = c.Post("/v1/completions", json{{"prompt", std::string(70, 'x')}}.dump(),
                  "application/json");
  expect_openai_error(r, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  EXPECT_NE(r->body.find("context is 64"), std::string::npos) << r->body;
  expect_openai_error(c.Get("/v1/nothing"), 404);
  // The service is still fine.
  EXPECT_EQ(c.Post("/v1/completions", R"({"prompt":"a","max_tokens":3})", "application/json")
                ->status, 200);
}

TEST(Server, NonStreamingBodies) {
  Running s(ServerOptions{});
  auto c = s.client();
  auto r = c.Post("/v1/completions", R"({"prompt":"hi","max_tokens":5,"model":"other"})",
                  "application/json");
  ASSERT_TRUE(r);
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "fake");  // another model's name is served by ours
  EXPECT_EQ(j["choices"][0]["text"], "ababa");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);  // BOS + 2 bytes
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["usage"]["total_tokens"], 8);
  // One JSON body with its length (no chunked framing), as before disconnects
  // were watched for: OpenAI clients and plain HTTP/1.0 tools read it alike.
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(r->body.size()));
  EXPECT_FALSE(r->has_header("Transfer-Encoding"));
  r = c.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})",
             "application/json");
  j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "ab");
}

// The data: payloads of a server-sent-event stream.
std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t p = 0;
  while ((p = body.find("data: ", p)) != std::string::npos) {
    size_t e = body.find("\n\n", p);
    out.push_back(body.substr(p + 6, e - p - 6));
    p = e;
  }
  return out;
}

TEST(Server, StreamingChunksUsageAndDone) {
  Running s(ServerOptions{});
  auto c = s.client();
  auto r = c.Post("/v1/chat/completions",
                  R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true,
                      "stream_options":{"include_usage":true}})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  auto d = sse_data(r->body);
  ASSERT_GE(d.size(), 4u);
  EXPECT_EQ(d.back(), "[DONE]");
  json first = json::parse(d[0]);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text, origins;
  for (size_t i = 1; i + 1 < d.size(); ++i) {
    json j = json::parse(d[i]);
    if (j["choices"].empty()) continue;
    auto& delta = j["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    if (j.contains("mtpspec") && j["mtpspec"].contains("tokens")) {
      for (auto& t : j["mtpspec"]["tokens"]) origins += t["origin"].get<std::string>() + ",";
    }
  }
  EXPECT_EQ(text, "abab");
  EXPECT_EQ(origins, "target,mtp0,target,target,");  // the fake marks token 1 as drafted
  json fin = json::parse(d[d.size() - 3]);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  json usage = json::parse(d[d.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
}

TEST(Server, ClientDisconnectMidStreamCancelsTheRequest) {
  Running s(ServerOptions{}, 20ms);
  auto c = s.client();
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt":"a","max_tokens":60,"stream":true})";
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  c.send(req);  // returns once the receiver says stop: the connection is closed
  EXPECT_EQ(chunks, 3);
  auto t0 = std::chrono::steady_clock::now();
  while (s.engine.cancelled_ == 0 && std::chrono::steady_clock::now() - t0 < 5s) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(s.engine.cancelled_, 1) << "the request ran on after its client left";
  while (s.engine.running() && std::chrono::steady_clock::now() - t0 < 5s) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(s.engine.running(), 0u);
  std::string m = s.client().Get("/metrics")->body;
  EXPECT_NE(m.find("mtpspec_requests_finished_total{reason=\"cancelled\"} 1"), std::string::npos)
      << m;
  EXPECT_EQ(test::metric(m, "mtpspec_requests_cancelled_total{stream=\"true\"}"), 1) << m;
}

// The non-streamed twin of the test above: the client sends its request and
// closes the socket before any byte of the response could come (httplib 0.11
// gives the handler no disconnect signal: connection.h).
TEST(Server, ClientDisconnectBeforeANonStreamedResponseCancelsTheRequest) {
  // 1000 tokens at 10 ms: 10 s if the request ran to its end.
  Running s(ServerOptions{}, 10ms, /*ctx=*/1024);
  int fd = test::connect_loopback(s.port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(test::send_all(
      fd, test::http_post("/v1/completions", R"({"prompt":"a","max_tokens":1000})")));
  std::this_thread::sleep_for(150ms);
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  auto metrics = [&] {
    auto r = s.client().Get("/metrics");
    return r ? r->body : std::string();
  };
  const std::string m = test::poll_until(
      metrics,
      [](const std::string& t) {
        return test::metric(t, "mtpspec_requests_finished_total{reason=\"cancelled\"}") >= 1;
      },
      8s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.engine.cancelled_, 1) << "the request ran on after its client left";
  EXPECT_EQ(test::metric(m, "mtpspec_requests_cancelled_total{stream=\"false\"}"), 1) << m;
  EXPECT_EQ(test::metric(m, "mtpspec_requests_cancelled_total{stream=\"true\"}"), 0) << m;
  // ~15 tokens before the close, then at most the 100 ms poll and a token.
  const double tokens = test::metric(m, "mtpspec_tokens_generated_total");
  EXPECT_GE(tokens, 0) << m;
  EXPECT_LT(tokens, 300) << "generated on for " << secs << " s after the client left";
  EXPECT_EQ(s.engine.running(), 0u);
}

// A client that stays connected (one keep-alive connection, requests longer
// than the disconnect poll, an idle pause between them) gets every token.
TEST(Server, ConnectedKeepAliveClientIsNeverTakenForGone) {
  Running s(ServerOptions{}, 5ms);
  auto c = s.client();
  c.set_keep_alive(true);
  for (int i = 0; i < 2; ++i) {
    auto r = c.Post("/v1/completions", R"({"prompt":"a","max_tokens":50})", "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["completion_tokens"], 50);
    std::this_thread::sleep_for(150ms);
  }
  EXPECT_EQ(s.engine.cancelled_, 0);
  std::string m = c.Get("/metrics")->body;
  EXPECT_EQ(test::metric(m, "mtpspec_requests_cancelled_total{stream=\"false\"}"), 0) << m;
}

TEST(Server, SlowClientIsDroppedAfterTheTimeout) {
  ServerOptions o;
  o.timeout_s = 1;
  Running s(o);
  int fd = test::connect_loopback(s.port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(test::send_all(
      fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
  timeval tv{6, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto t0 = std::chrono::steady_clock::now();
  char buf[512];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  EXPECT_EQ(n, 0) << "the server did not close the stalled connection";
  EXPECT_LT(secs, 5.0);
  // Other clients are served meanwhile and after.
  EXPECT_EQ(s.client().Get("/health")->status, 200);
}

TEST(Server, MetricsNames) {
  Running s(ServerOptions{});
  auto c = s.client();
  c.Post("/v1/completions", R"({"prompt":"a","max_tokens":3})", "application/json");
  std::string m = c.Get("/metrics")->body;
  for (const char* name : {"mtpspec_requests_total{endpoint=\"completions\"} 1",
                           "mtpspec_queue_depth 0", "mtpspec_tokens_generated_total 3",
                           "mtpspec_verify_rows_per_forward", "# TYPE mtpspec_acceptance gauge"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name << " not in\n" << m;
  }
}

}  // namespace
}  // namespace mtp::serve
