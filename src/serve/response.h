// One generation request's way back to its client: the events channel from
// the engine thread, the OpenAI JSON bodies (completion, chat completion, and
// their streamed chunks), and the two ways of answering, each of which gives
// up (for the caller to cancel the request) when the client goes away.
#pragma once
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api.h"
#include "serve/engine.h"

namespace httplib {
struct Response;
}

namespace mtp::serve {

// A parsed request, ready for the engine.
struct Prepared {
  ApiRequest api;
  Request req;
  std::string id, model;  // response id; the served model's id
  std::time_t created = 0;
  // Chat: how the reply's text is read back (content, reasoning_content,
  // tool_calls: serve/reply_parser.h).
  ChatFormat reply_format = ChatFormat::Plain;
  bool reply_in_thought = false;  // the prompt opened the thinking part
};

// One request's events, from the engine thread to the HTTP thread.
class Channel {
 public:
  void push(const Event& e);  // the engine's callback
  // The events so far, waiting up to `wait` for the first (negative: forever).
  std::vector<Event> take(std::chrono::milliseconds wait);
  bool finished() const;      // the Done event has been taken

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> q_;
  bool taken_done_ = false;
};

// JSON text (invalid UTF-8, which our text never holds, replaced).
std::string dump(const nlohmann::json& j);
void send_error(httplib::Response& res, const ApiError& e);

// Non-streaming: waits for the whole completion and sets the JSON body
// (500 with an OpenAI error body if the engine failed); returns true. While
// it waits it asks `connected()` after each batch of events and at least
// every `poll`; once that says false it returns false at once, with nothing
// set (the caller cancels the request: nobody is left to read it).
bool respond(httplib::Response& res, const Prepared& p, Channel& ch,
             const std::function<bool()>& connected, std::chrono::milliseconds poll);

// Streaming: sets a chunked text/event-stream provider that writes each batch
// of events as one chunk, a comment line every second while none come (so a
// vanished client is noticed while queued), the finish chunk, the usage chunk
// (stream_options.include_usage), then "data: [DONE]". A failed write or the
// response's end before Done calls `drop` (which cancels the request; it may
// be called more than once).
void stream_response(httplib::Response& res, std::shared_ptr<Prepared> p,
                     std::shared_ptr<Channel> ch, std::function<void()> drop);

}  // namespace mtp::serve
