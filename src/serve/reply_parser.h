// A chat reply read as it is generated: the text the client sees as
// `content`, the model's thinking as `reasoning_content` and its tool calls
// as OpenAI `tool_calls`, for the chat formats whose templates define them
// (gemma4: <|channel>[thought\n]...<channel|> is thinking, <|tool_call>call:NAME{
// ARGS}<tool_call|> a call, serve/gemma4_chat.h; qwen35: the text up to
// </think> is thinking when the prompt opened <think> — else <think>...</think>
// is —, <tool_call>...</tool_call> a call, serve/qwen35_chat.h, its newlines
// next to the markers dropped); every other format's reply is all content.
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
  // in_thought: the prompt ended inside the thinking part (qwen35 with
  // thinking on); tools: the request's, for the declared parameter types.
  explicit ReplyParser(ChatFormat f, bool in_thought = false,
                       nlohmann::json tools = nlohmann::json::array());
  ReplyDelta feed(std::string_view text);
  ReplyDelta finish();

 private:
  enum class State { Content, ChannelName, Thought, Call };
  // Consumes buf_ as far as it can decide; `final`: nothing more will come.
  ReplyDelta drain(bool final);
  ReplyDelta drain_qwen35(bool final);
  // Drops the newlines at the front of buf_ while skip_newlines_ is set.
  void skip_newlines();
  void end_call(ReplyDelta& d);
  // Moves buf_ up to `close` into `sink` and drops `close` (true), or, with
  // no `close` yet, all of buf_ but a tail that may begin it (false).
  // trim_newlines: newlines before `close` are dropped (held back until
  // the text after them decides).
  bool take_until(std::string_view close, std::string& sink, bool final,
                  bool trim_newlines = false);

  ChatFormat format_;
  bool structured_;
  bool skip_newlines_ = false;
  nlohmann::json tools_;
  State state_ = State::Content;
  std::string buf_, call_;
};

}  // namespace mtp::serve
