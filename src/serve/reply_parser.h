// A chat reply read as it is generated: the text the client sees as
// `content`, the model's thinking as `reasoning_content` and its tool calls
// as OpenAI `tool_calls`, for the chat formats whose templates define them
// (gemma4: <|channel>[thought\n]...<channel|> is thinking, <|tool_call>call:NAME{
// ARGS}<tool_call|> a call, serve/gemma4_chat.h); every other format's reply
// is all content.
//
// Text is fed piece by piece; a piece that could be the start of a marker is
// held back until the next one decides (so no marker leaks into `content`),
// and finish() gives what is left: an unfinished thought is reasoning, an
// unfinished or unreadable call stays content as the model wrote it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat_template.h"

namespace mtp::serve {

// A call as the reply made it: its tool, and its arguments as JSON text.
struct ReplyCall {
  std::string name, arguments;
};

struct ReplyDelta {
  std::string content, reasoning;
  std::vector<ReplyCall> calls;
  bool empty() const { return content.empty() && reasoning.empty() && calls.empty(); }
  void append(ReplyDelta d);
};

class ReplyParser {
 public:
  explicit ReplyParser(ChatFormat f) : structured_(f == ChatFormat::Gemma4) {}
  ReplyDelta feed(std::string_view text);
  ReplyDelta finish();

 private:
  enum class State { Content, ChannelName, Thought, Call };
  // Consumes buf_ as far as it can decide; `final`: nothing more will come.
  ReplyDelta drain(bool final);
  void end_call(ReplyDelta& d);
  // Moves buf_ up to `close` into `sink` and drops `close` (true), or, with
  // no `close` yet, all of buf_ but a tail that may begin it (false).
  bool take_until(std::string_view close, std::string& sink, bool final);

  bool structured_;
  State state_ = State::Content;
  std::string buf_, call_;
};

}  // namespace mtp::serve
