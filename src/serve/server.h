// The OpenAI-compatible HTTP server (cpp-httplib) over an Engine (engine.h).
//
// Routes: POST /v1/completions, POST /v1/chat/completions (stream: server-sent
// events ending in "data: [DONE]"), GET /v1/models, GET /health, GET /metrics
// (Prometheus), GET / (the live page, page.h). With an API key every route but
// /health and the static page / needs "Authorization: Bearer KEY" (401): the
// page holds no data and sends the key it is given with each of its calls.
//
// Streamed chunks carry an extension beside OpenAI's fields,
//   "mtpspec": {"tokens": [{"id", "text", "origin"}]}    (origin: Origin::name())
// and the last one {"stats": SpecStats::to_json(), "timings": {...}}; clients
// that do not know it ignore it. Text is complete UTF-8 and never holds the
// start of a stop string (token_sink.h); a token's text is what it released.
//
// Robustness: bodies over max_body bytes 413; malformed JSON and wrong types
// 400 (api.h); a prompt that leaves no room in the context 400; a client that
// goes away cancels its request (the engine frees the slot): mid-stream when
// a write fails (or the 1 s keep-alive comment does), and while a non-streamed
// request waits for its completion within disconnect_poll_ms (connection.h:
// its socket is peeked at, its bytes unchanged: same status, Content-Type,
// Content-Length body);
// slow clients never hold a worker: a request is read whole by the intake
// (intake.h) within request_timeout_s before a worker takes it, and each
// client address has at most max_conns_per_client connections;
// stop_accepting() refuses new connections and lets the in-flight requests
// finish.
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"
#include "serve/chat_template.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "serve/response.h"


namespace mtp::serve {

class HttpServer;  // httplib::Server with the intake and a graceful stop (intake.h)

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (bind() returns it)
  std::string api_key;                // "" = no authentication
  size_t max_body = 1 << 20;          // bytes
  int timeout_s = 30;                 // socket write timeout, and the cap of request_timeout_s
  int request_timeout_s = 10;         // a request's head and body must arrive within this (intake.h)
  int max_conns_per_client = 64;      // connections open at once per client address (429 past it)
  int max_pending_conns = 512;        // connections waiting for their requests, in all (503)
  int http_threads = 8;               // requests served at once (complete requests only)
  int disconnect_poll_ms = 100;       // a non-streamed request's client is checked this often (>= 1)
  ChatTemplate chat;
};

class Server {
 public:
  Server(Engine& engine, const io::Tokenizer& tok, ServerOptions o);
  ~Server();
  // Binds host:port; returns the port. ConfigError if it cannot.
  int bind();
  // Serves until stop(); returns when every connection handler has finished.
  void listen();
  // Graceful: closes the listening socket (new connections are refused) and
  // lets listen() return once the in-flight requests, streams included, have
  // finished (idle keep-alive connections close within 2 s). Thread-safe.
  void stop_accepting();
  // Immediate: also ends the running streams (their requests are cancelled).
  void stop();
  const Metrics& metrics() const { return metrics_; }

 private:
  void routes();
  Prepared prepare(const std::string& body, Endpoint endpoint);

  Engine& engine_;
  const io::Tokenizer& tok_;
  ServerOptions opt_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> stopping_{false};  // stop() called: cancels are the server's, not a client's
};

}  // namespace mtp::serve
