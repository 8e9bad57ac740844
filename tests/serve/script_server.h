// A chat server over a scripted engine for the serve tests: the engine
// replies with a fixed text, one byte per token (through test::ByteTokenizer),
// and keeps the prompt it got; read_stream adds up a streamed chat reply.
#pragma once
#include <httplib.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/server.h"
#include "serve/serve_util.h"

namespace mtp::test {

// Emits a scripted reply, one byte per token, and keeps the prompt it got.
class ScriptEngine : public serve::Engine {
 public:
  explicit ScriptEngine(std::string reply) : reply_(std::move(reply)) {
    info_.model_id = "script";
    info_.ctx = 4096;
  }
  ~ScriptEngine() override {
    for (auto& t : threads_) t.join();
  }
  const serve::EngineInfo& info() const override { return info_; }
  serve::Handle submit(serve::Request r, serve::EventFn f) override {
    std::lock_guard<std::mutex> lk(mu_);
    prompts_.push_back(r.prompt);
    threads_.emplace_back([this, f] {
      for (char ch : reply_) {
        serve::Event e;
        e.token = 3 + uint8_t(ch);
        e.text = std::string(1, ch);
        f(e);
      }
      serve::Event d;
      d.type = serve::Event::Type::Done;
      d.finish_reason = "stop";
      d.completion_tokens = int(reply_.size());
      f(d);
    });
    return serve::Handle(threads_.size());
  }
  void cancel(serve::Handle) override {}
  size_t queue_depth() const override { return 0; }
  size_t running() const override { return 0; }
  void shutdown(bool) override {}
  std::string last_prompt() {
    std::lock_guard<std::mutex> lk(mu_);
    std::string s;
    for (size_t i = 1; i < prompts_.back().size(); ++i) s += char(prompts_.back()[i] - 3);
    return s;
  }

 private:
  std::string reply_;
  serve::EngineInfo info_;
  std::mutex mu_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::thread> threads_;
};

// A server of chat format `f` over a ScriptEngine replying `reply`, listening
// on a loopback port until destroyed; `client` talks to it.
struct ScriptServer {
  test::ByteTokenizer tok;
  ScriptEngine engine;
  serve::Server server;
  std::thread th;
  httplib::Client client;
  static serve::ServerOptions options(serve::ChatFormat f) {
    serve::ServerOptions o;
    o.port = 0;
    o.chat.format = f;
    return o;
  }
  ScriptServer(serve::ChatFormat f, std::string reply)
      : engine(std::move(reply)), server(engine, tok, options(f)), client("127.0.0.1", server.bind()) {
    th = std::thread([this] { server.listen(); });
    client.set_read_timeout(10, 0);
  }
  ~ScriptServer() {
    server.stop();
    th.join();
  }
};


// The deltas of a streamed chat completion (server-sent events), added up.
struct StreamedReply {
  std::string content, reasoning, finish;
  nlohmann::json calls = nlohmann::json::array();
};

inline StreamedReply read_stream(const std::string& body) {
  StreamedReply out;
  for (size_t p = 0; (p = body.find("data: ", p)) != std::string::npos;) {
    const size_t e = body.find("\n\n", p);
    const std::string d = body.substr(p + 6, e - p - 6);
    p = e;
    if (d == "[DONE]") break;
    const nlohmann::json ch = nlohmann::json::parse(d);
    if (ch["choices"].empty()) continue;
    const nlohmann::json& delta = ch["choices"][0]["delta"];
    if (delta.contains("content")) out.content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) {
      out.reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("tool_calls")) {
      for (const nlohmann::json& tc : delta["tool_calls"]) out.calls.push_back(tc);
    }
    if (!ch["choices"][0]["finish_reason"].is_null()) out.finish = ch["choices"][0]["finish_reason"];
  }
  return out;
}

}  // namespace mtp::test
