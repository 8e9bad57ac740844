#include "serve/response.h"

#include <httplib.h>

#include "serve/reply_parser.h"

namespace mtp::serve {

using nlohmann::json;

void Channel::push(const Event& e) {
  std::lock_guard<std::mutex> lk(mu_);
  q_.push_back(e);
  cv_.notify_all();
}

std::vector<Event> Channel::take(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lk(mu_);
  if (wait.count() < 0) {
    cv_.wait(lk, [&] { return !q_.empty(); });
  } else {
    cv_.wait_for(lk, wait, [&] { return !q_.empty(); });
  }
  std::vector<Event> out(std::make_move_iterator(q_.begin()), std::make_move_iterator(q_.end()));
  q_.clear();
  for (const auto& e : out) taken_done_ |= e.type == Event::Type::Done;
  return out;
}

bool Channel::finished() const {
  std::lock_guard<std::mutex> lk(mu_);
  return taken_done_;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
}

namespace {

json usage_json(const Event& d) {
  return {{"prompt_tokens", d.prompt_tokens}, {"completion_tokens", d.completion_tokens},
          {"total_tokens", d.prompt_tokens + d.completion_tokens}};
}

// The "mtpspec" extension of the last chunk / the response.
json extension_json(const Event& d) {
  const auto& t = d.timings;
  json x = {{"timings", {{"prompt_tokens", t.n_prompt}, {"prompt_s", t.prompt_s},
                         {"generated_tokens", t.n_gen}, {"generation_s", t.gen_s},
                         {"generation_tok_s", t.gen_tok_s()}}}};
  if (d.stats) x["stats"] = d.stats->to_json();
  return x;
}

bool is_chat(const Prepared& p) { return p.api.endpoint == Endpoint::Chat; }

// A response or chunk skeleton with one choice.
json envelope(const Prepared& p, bool chunk) {
  const char* object = is_chat(p) ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                  : "text_completion";
  return {{"id", p.id}, {"object", object}, {"created", p.created}, {"model", p.model}};
}

// OpenAI's tool_calls entries of the reply's calls, numbered from `first`
// (ids "call_<response id>_<n>"; streamed chunks also carry the index).
json tool_calls_json(const Prepared& p, const std::vector<ReplyCall>& calls, size_t first,
                     bool chunk) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", "call_" + p.id + "_" + std::to_string(first + i)},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (chunk) c["index"] = first + i;
    out.push_back(std::move(c));
  }
  return out;
}

// The finish reason of a chat reply that called tools: "tool_calls".
json finish_of(const json& finish, bool called) {
  return called && finish == "stop" ? json("tool_calls") : finish;
}

// One choice holding `text` (chunk: as a delta).
json choice(const Prepared& p, const std::string& text, bool chunk, const json& finish) {
  json c = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
  if (!is_chat(p)) {
    c["text"] = text;
  } else if (chunk) {
    c["delta"] = json::object();
    if (!text.empty()) c["delta"]["content"] = text;
  } else {
    c["message"] = {{"role", "assistant"}, {"content", text}};
  }
  return c;
}

// One chat choice holding a parsed reply (whole, or a streamed delta whose
// calls are numbered from `first_call`).
json chat_choice(const Prepared& p, const ReplyDelta& r, bool chunk, const json& finish,
                 size_t first_call = 0) {
  json c = choice(p, r.content, chunk, finish);
  json& m = c[chunk ? "delta" : "message"];
  if (!r.reasoning.empty()) m["reasoning_content"] = r.reasoning;
  if (!r.calls.empty()) {
    m["tool_calls"] = tool_calls_json(p, r.calls, first_call, chunk);
    if (!chunk && r.content.empty()) m["content"] = nullptr;
  }
  return c;
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

bool respond(httplib::Response& res, const Prepared& p, Channel& ch,
             const std::function<bool()>& connected, std::chrono::milliseconds poll) {
  std::string text;
  for (;;) {
    for (const Event& e : ch.take(poll)) {
      if (e.type == Event::Type::Token) {
        text += e.text;
        continue;
      }
      if (e.finish_reason == "error") {
        send_error(res, ApiError(500, "generation failed: " + e.error, "", "server_error"));
        return true;
      }
      json r = envelope(p, false);
      if (is_chat(p)) {
        ReplyParser parser(p.reply_format, p.reply_in_thought, p.api.extras.tools);
        ReplyDelta reply = parser.feed(text);
        reply.append(parser.finish());
        r["choices"] = json::array(
            {chat_choice(p, reply, false, finish_of(e.finish_reason, !reply.calls.empty()))});
      } else {
        r["choices"] = json::array({choice(p, text, false, e.finish_reason)});
      }
      r["usage"] = usage_json(e);
      r["mtpspec"] = extension_json(e);
      res.set_content(dump(r), "application/json");
      return true;
    }
    if (!connected()) return false;
  }
}

void stream_response(httplib::Response& res, std::shared_ptr<Prepared> p,
                     std::shared_ptr<Channel> ch, std::function<void()> drop) {
  auto sent_role = std::make_shared<bool>(false);
  auto parser =
      std::make_shared<ReplyParser>(p->reply_format, p->reply_in_thought, p->api.extras.tools);
  auto calls = std::make_shared<size_t>(0);  // tool calls streamed so far
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [drop, p, ch, sent_role, parser, calls](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) {
          if (sink.write(s.data(), s.size())) return true;
          drop();  // the client went away: free its slot
          return false;
        };
        if (is_chat(*p) && !*sent_role) {  // OpenAI's first chunk: the role
          *sent_role = true;
          json c = envelope(*p, true);
          c["choices"] = json::array({choice(*p, "", true, nullptr)});
          c["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
          if (!write(sse(c))) return false;
        }
        std::vector<Event> evs = ch->take(std::chrono::milliseconds(1000));
        if (evs.empty()) return write(": waiting\n\n");
        std::string text;
        json tokens = json::array();
        const Event* done = nullptr;
        for (const Event& e : evs) {
          if (e.type == Event::Type::Done) {
            done = &e;
            break;
          }
          text += e.text;
          tokens.push_back({{"id", e.token}, {"text", e.text}, {"origin", e.origin.name()}});
        }
        std::string out;
        // A chat delta: the reply parsed so far (text that may open a marker
        // waits for the next batch); the rest when done.
        auto delta = [&](const ReplyDelta& r, const json& finish) {
          json c = chat_choice(*p, r, true, finish, *calls);
          *calls += r.calls.size();
          return c;
        };
        if (!tokens.empty()) {
          json c = envelope(*p, true);
          c["choices"] = json::array({is_chat(*p) ? delta(parser->feed(text), nullptr)
                                                  : choice(*p, text, true, nullptr)});
          c["mtpspec"] = {{"tokens", tokens}};
          out += sse(c);
        }
        if (done) {
          if (done->finish_reason == "error") {
            out += sse(error_body(ApiError(500, "generation failed: " + done->error, "",
                                           "server_error")));
          } else {
            json c = envelope(*p, true);
            if (is_chat(*p)) {
              const ReplyDelta rest = parser->finish();
              c["choices"] = json::array(
                  {delta(rest, finish_of(done->finish_reason, *calls + rest.calls.size() > 0))});
            } else {
              c["choices"] = json::array({choice(*p, "", true, done->finish_reason)});
            }
            c["mtpspec"] = extension_json(*done);
            out += sse(c);
            if (p->api.include_usage) {
              json u = envelope(*p, true);
              u["choices"] = json::array();
              u["usage"] = usage_json(*done);
              out += sse(u);
            }
          }
          out += "data: [DONE]\n\n";
        }
        if (!write(out)) return false;
        if (done) sink.done();
        return true;
      },
      [drop, ch](bool) {
        if (!ch->finished()) drop();  // ended early (disconnect, shutdown)
      });
}

}  // namespace mtp::serve
