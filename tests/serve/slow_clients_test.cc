// Slow and greedy clients on loopback (issue 60): 40 connections dripping
// one byte at a time, each from its own address (127.0.0.2 ... 127.0.0.41),
// must not delay a well-behaved request; a dripping request is answered 408
// after the request timeout; one address cannot open more than its share of
// connections; a deeply nested body is a 400 and the server answers exactly
// after it. Bounded: every loop and wait has a deadline of a few seconds.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "serve/serve_util.h"
#include "serve/server.h"

namespace mtp::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Answers every request at once with "ok" (two tokens), on the caller's thread.
class InstantEngine : public Engine {
 public:
  InstantEngine() {
    info_.model_id = "instant";
    info_.ctx = 4096;
  }
  const EngineInfo& info() const override { return info_; }
  Handle submit(Request r, EventFn f) override {
    for (const char* t : {"o", "k"}) {
      Event e;
      e.token = 3 + t[0];
      e.text = t;
      f(e);
    }
    Event d;
    d.type = Event::Type::Done;
    d.finish_reason = "length";
    d.prompt_tokens = int(r.prompt.size());
    d.completion_tokens = 2;
    f(d);
    return ++next_;
  }
  void cancel(Handle) override {}
  size_t queue_depth() const override { return 0; }
  size_t running() const override { return 0; }
  void shutdown(bool) override {}

 private:
  EngineInfo info_;
  std::atomic<Handle> next_{0};
};

struct Serving {
  explicit Serving(ServerOptions o) : server(engine, tok, [&] {
    o.port = 0;
    return o;
  }()) {
    port = server.bind();
    thread = std::thread([this] { server.listen(); });
  }
  ~Serving() {
    server.stop();
    thread.join();
  }
  test::ByteTokenizer tok;
  InstantEngine engine;
  Server server;
  int port = 0;
  std::thread thread;
};

// A TCP connection to 127.0.0.1:port from the loopback address `from`.
int connect_from(const std::string& from, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in src{}, dst{};
  src.sin_family = dst.sin_family = AF_INET;
  ::inet_pton(AF_INET, from.c_str(), &src.sin_addr);
  dst.sin_port = htons(uint16_t(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ADD_FAILURE() << "cannot connect from " << from;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// What the server sends before closing, waiting at most `limit`.
std::string read_until_closed(int fd, std::chrono::milliseconds limit) {
  timeval tv{0, 100 * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  for (const auto end = Clock::now() + limit; Clock::now() < end;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n > 0) got.append(buf, size_t(n));
  }
  return got;
}

double completion_seconds(int port, std::string& text) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(5, 0);
  const auto t0 = Clock::now();
  auto r = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  text = r && r->status == 200 ? json::parse(r->body)["choices"][0]["text"].get<std::string>()
                               : "(no answer)";
  return s;
}

TEST(SlowClients, FortyDrippingConnectionsDoNotDelayANormalRequest) {
  ServerOptions o;
  o.http_threads = 8;
  o.request_timeout_s = 3;
  o.max_conns_per_client = 4;
  Serving s(o);
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n";
  std::vector<int> slow;
  for (int i = 2; i <= 41; ++i) slow.push_back(connect_from("127.0.0." + std::to_string(i), s.port));
  std::atomic<bool> stop{false};
  std::thread drip([&] {  // one byte per connection every 200 ms, for at most 6 s
    for (size_t k = 0; k < 30 && !stop; ++k) {
      for (int fd : slow) {
        if (fd >= 0 && k < head.size()) ::send(fd, head.data() + k, 1, MSG_NOSIGNAL);
      }
      std::this_thread::sleep_for(200ms);
    }
  });
  std::this_thread::sleep_for(500ms);  // every slow connection has started its request
  for (int i = 0; i < 3; ++i) {
    std::string text;
    const double secs = completion_seconds(s.port, text);
    EXPECT_EQ(text, "ok");
    EXPECT_LT(secs, 2.0) << "a normal request waited behind the dripping ones";
  }
  // The dripping requests do not arrive within 3 s: each is answered 408 and closed.
  const std::string got = read_until_closed(slow[0], 5000ms);
  EXPECT_NE(got.find(" 408 "), std::string::npos) << got;
  stop = true;
  drip.join();
  for (int fd : slow) ::close(fd);
  std::string text;
  EXPECT_LT(completion_seconds(s.port, text), 2.0);
  EXPECT_EQ(text, "ok");
}

TEST(SlowClients, OneAddressGetsAtMostItsShareOfConnections) {
  ServerOptions o;
  o.max_conns_per_client = 4;
  Serving s(o);
  std::vector<int> mine;
  for (int i = 0; i < 4; ++i) mine.push_back(connect_from("127.0.0.42", s.port));
  std::this_thread::sleep_for(200ms);
  const int extra = connect_from("127.0.0.42", s.port);
  const std::string got = read_until_closed(extra, 3000ms);
  EXPECT_NE(got.find(" 429 "), std::string::npos) << got;
  EXPECT_NE(got.find("127.0.0.42"), std::string::npos) << got;
  ::close(extra);
  // Other addresses are served meanwhile; a closed connection frees its place.
  std::string text;
  EXPECT_LT(completion_seconds(s.port, text), 2.0);
  EXPECT_EQ(text, "ok");
  ::close(mine[0]);
  std::this_thread::sleep_for(200ms);
  const int again = connect_from("127.0.0.42", s.port);
  ASSERT_TRUE(test::send_all(again, test::http_post("/v1/completions", R"({"prompt":"a","max_tokens":2})")));
  EXPECT_NE(read_until_closed(again, 3000ms).find(" 200 "), std::string::npos);
  ::close(again);
  for (size_t i = 1; i < mine.size(); ++i) ::close(mine[i]);
}

// 400,000 nested arrays in messages[0].content (800 KB, under the body limit)
// crashed the server; now a 400 naming the field, and it answers exactly after.
TEST(SlowClients, DeepJsonBodiesAre400AndTheServerAnswersOn) {
  ServerOptions o;
  o.max_body = 1 << 21;
  Serving s(o);
  httplib::Client c("127.0.0.1", s.port);
  c.set_read_timeout(10, 0);
  std::string objects;
  for (int i = 0; i < 200000; ++i) objects += R"({"a":)";
  for (const std::string& inner : {std::string(400000, '['), objects}) {
    std::string body = R"({"messages": [{"role": "user", "content": )" + inner;
    auto r = c.Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(r) << "no answer: the server died";
    EXPECT_EQ(r->status, 400) << r->body.substr(0, 300);
    EXPECT_NE(r->body.find("deeper than"), std::string::npos) << r->body.substr(0, 300);
    EXPECT_NE(r->body.find("messages[].content"), std::string::npos) << r->body.substr(0, 300);
  }
  std::string text;
  completion_seconds(s.port, text);
  EXPECT_EQ(text, "ok");
}

}  // namespace
}  // namespace mtp::serve
