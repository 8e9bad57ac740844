#include "serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <random>

#include <sys/socket.h>

#include "core/error.h"
#include "core/setting.h"
#include "serve/api.h"
#include "serve/connection.h"
#include "serve/intake.h"
#include "serve/page.h"
#include "serve/response.h"

namespace mtp::serve {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Compares without an early exit (the key's prefix is not observable by timing).
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char d = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) d |= uint8_t(a[i] ^ (i < b.size() ? b[i] : 0));
  return d == 0;
}

}  // namespace

static IntakeOptions intake_options(const ServerOptions& o) {
  IntakeOptions i;
  i.request_timeout_ms = 1000 * std::min(o.request_timeout_s, o.timeout_s);
  i.keep_alive_ms = 2000;
  i.write_timeout_ms = 1000 * o.timeout_s;
  i.max_per_client = o.max_conns_per_client;
  i.max_pending = o.max_pending_conns;
  i.max_body = o.max_body;
  i.workers = o.http_threads;
  return i;
}

Server::Server(Engine& engine, const io::Tokenizer& tok, ServerOptions o)
    : engine_(engine), tok_(tok), opt_(std::move(o)) {
  http_ = std::make_unique<HttpServer>(intake_options(opt_), [this](int status,
                                                                    const std::string& msg) {
    metrics_.http_error(status);
    return error_body(ApiError(status, msg)).dump();
  });
  http_->set_payload_max_length(opt_.max_body);
  http_->set_read_timeout(opt_.timeout_s, 0);
  http_->set_write_timeout(opt_.timeout_s, 0);
  http_->set_keep_alive_timeout(2);
  http_->set_tcp_nodelay(true);  // no 40 ms delayed-ACK stall per small response
  routes();
}

Server::~Server() = default;

int Server::bind() {
  int port = opt_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(opt_.host);
  } else if (!http_->bind_to_port(opt_.host, port)) {
    port = -1;
  }
  if (port < 0) fail<ConfigError>("cannot listen on {}:{} (in use, or not an address here)",
                                  opt_.host, opt_.port);
  http_->raise_backlog();
  return port;
}

void Server::listen() { http_->listen_after_bind(); }
void Server::stop() {
  stopping_.store(true);
  http_->stop();
}
void Server::stop_accepting() { http_->stop_accepting(); }

Prepared Server::prepare(const std::string& body, Endpoint endpoint) {
  Prepared p;
  p.api = parse_request(body, endpoint);
  const EngineInfo& info = engine_.info();
  p.model = info.model_id;  // another model's name is served by ours (documented)
  p.created = std::time(nullptr);
  p.id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id_);
  Request& r = p.req;
  try {
    if (endpoint == Endpoint::Chat) {
      r.prompt = encode_chat(tok_, opt_.chat.render(p.api.messages, p.api.extras));
      for (const std::string& e : opt_.chat.turn_ends()) p.api.stop.push_back(e);
      p.reply_format = opt_.chat.format;
      p.reply_in_thought = opt_.chat.prompt_opens_thought(p.api.extras);
    } else if (p.api.prompt_is_ids) {
      for (int64_t t : p.api.prompt_ids) {
        if (t < 0 || t >= tok_.vocab_size()) {
          throw ApiError(400, "'prompt' holds token id " + std::to_string(t) +
                                  ", outside the vocabulary of " +
                                  std::to_string(tok_.vocab_size()), "prompt");
        }
        r.prompt.push_back(int32_t(t));
      }
    } else {
      r.prompt = tok_.encode(p.api.prompt, /*add_special=*/true);
    }
  } catch (const InputError& e) {
    // A refusal about one field (the tools, the thinking switch) names it.
    const char* field = setting_of(e);
    throw ApiError(400, e.what(), field ? field : endpoint == Endpoint::Chat ? "messages" : "prompt");
  }
  if (r.prompt.empty()) throw ApiError(400, "the prompt is empty (and the model adds no BOS)",
                                       "prompt");
  if (int64_t(r.prompt.size()) >= info.ctx) {
    throw ApiError(400,
                   "the prompt is " + std::to_string(r.prompt.size()) + " tokens; the context "
                   "is " + std::to_string(info.ctx) + " tokens per request (--ctx), which "
                   "leaves no room to generate", endpoint == Endpoint::Chat ? "messages" : "prompt",
                   "invalid_request_error", "context_length_exceeded");
  }
  r.sampling = p.api.sampling;
  if (!p.api.seed_given && !r.sampling.greedy()) r.sampling.seed = std::random_device{}();
  r.mode = p.api.mode;
  r.max_tokens = int(std::min<int64_t>(p.api.max_tokens, info.ctx));  // clipped to the context
  r.stop = p.api.stop;
  r.speculate = p.api.drafter.value_or(true);
  return p;
}

void Server::routes() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty() || req.path == "/health" || req.path == "/") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (same_secret(req.get_header_value("Authorization"), "Bearer " + opt_.api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    metrics_.http_error(401);
    send_error(res, ApiError(401, "missing or wrong API key: send 'Authorization: Bearer KEY'",
                             "", "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib raises itself (413 body too large, 404, 400 bad request line).
  http_->set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    metrics_.http_error(res.status);
    std::string msg = res.status == 413   ? "the request body is larger than the limit (--max-body)"
                      : res.status == 404 ? "no such route"
                                          : "bad request";
    send_error(res, ApiError(res.status, msg));
  });
  http_->set_exception_handler([this](const httplib::Request&, httplib::Response& res,
                                      std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    metrics_.http_error(500);
    send_error(res, ApiError(500, msg, "", "server_error"));
  });

  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(page_html(), "text/html; charset=utf-8");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.prometheus([this] {
      return Metrics::Gauges{engine_.queue_depth(), engine_.running()};
    }), "text/plain; version=0.0.4");
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const EngineInfo& i = engine_.info();
    json m = {{"id", i.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "mtpspec"},
              {"mtpspec", {{"ctx", i.ctx}, {"parallel", i.parallel},
                           {"drafter", i.has_drafter}, {"draft_k", i.draft_k},
                           {"chat_format", chat_format_name(opt_.chat.format)}}}};
    res.set_content(dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  auto generate = [this](Endpoint ep) {
    return [this, ep](const httplib::Request& req, httplib::Response& res) {
      std::shared_ptr<Prepared> p;
      try {
        p = std::make_shared<Prepared>(prepare(req.body, ep));
      } catch (const ApiError& e) {
        metrics_.http_error(e.status);
        send_error(res, e);
        return;
      }
      metrics_.request(ep == Endpoint::Chat ? "chat" : "completions");
      const bool stream = p->api.stream;
      auto ch = std::make_shared<Channel>();
      // Set before the server cancels a request whose client went away, so
      // its Done ("cancelled") counts as a disconnect, not a shutdown.
      auto gone = std::make_shared<std::atomic<bool>>(false);
      Handle h = 0;
      try {
        h = engine_.submit(p->req, [this, ch, gone, stream](const Event& e) {
          if (e.type == Event::Type::Done) {
            // Counted first: whoever sees the finish also sees why.
            if (e.finish_reason == "cancelled" && gone->load()) metrics_.client_gone(stream);
            metrics_.finished(e.finish_reason, e.completion_tokens,
                              e.stats ? &*e.stats : nullptr);
          }
          ch->push(e);
        });
      } catch (const InputError& e) {  // shutting down
        metrics_.http_error(503);
        send_error(res, ApiError(503, e.what(), "", "server_error"));
        return;
      }
      auto drop = [this, h, gone] {
        if (!stopping_.load()) gone->store(true);  // stop() ends streams too: not the client
        engine_.cancel(h);
      };
      if (stream) {
        stream_response(res, p, ch, drop);
        return;
      }
      ClientConnection client(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
      if (!respond(res, *p, *ch, [&] { return client.connected(); },
                   std::chrono::milliseconds(std::max(opt_.disconnect_poll_ms, 1)))) {
        drop();  // the engine's Done still comes, to the channel nobody reads
        // Never reaches the client; nginx's "client closed request", for loggers.
        send_error(res, ApiError(499, "the client closed the connection before the completion "
                                      "was ready", "", "invalid_request_error",
                                 "client_closed_request"));
      }
    };
  };
  http_->Post("/v1/completions", generate(Endpoint::Completions));
  http_->Post("/v1/chat/completions", generate(Endpoint::Chat));
}

}  // namespace mtp::serve
