#include "serve/reply_parser.h"

#include "serve/gemma4_chat.h"
#include "serve/qwen35_chat.h"

namespace mtp::serve {

namespace {

constexpr std::string_view kChannelOpen = "<|channel>", kChannelClose = "<channel|>",
                           kCallOpen = "<|tool_call>", kCallClose = "<tool_call|>",
                           kThoughtName = "thought\n", kThinkOpen = "<think>",
                           kThinkClose = "</think>", kQwenCallOpen = "<tool_call>",
                           kQwenCallClose = "</tool_call>";

// The length of the longest suffix of `s` that is a proper prefix of one of
// `markers`: text that must wait for the next piece.
size_t pending_prefix(std::string_view s, std::initializer_list<std::string_view> markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    for (size_t n = std::min(s.size(), m.size() - 1); n > best; --n) {
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        best = n;
        break;
      }
    }
  }
  return best;
}

// The number of newlines right before position `end` of `s`.
size_t newlines_in_front(std::string_view s, size_t end) {
  size_t n = 0;
  while (n < end && s[end - n - 1] == '\n') ++n;
  return n;
}

// The length of s's tail from the newlines right before `end`: what a
// newline-trimming reader holds back when the text ends at `end`.
size_t newlines_before(std::string_view s, size_t end) {
  return s.size() - end + newlines_in_front(s, end);
}

}  // namespace

void ReplyDelta::append(ReplyDelta d) {
  content += d.content;
  reasoning += d.reasoning;
  for (auto& c : d.calls) calls.push_back(std::move(c));
}

ReplyParser::ReplyParser(ChatFormat f, bool in_thought, nlohmann::json tools)
    : format_(f), structured_(f == ChatFormat::Gemma4 || f == ChatFormat::Qwen35),
      tools_(std::move(tools)) {
  if (f == ChatFormat::Qwen35 && in_thought) state_ = State::Thought, skip_newlines_ = true;
}

ReplyDelta ReplyParser::feed(std::string_view text) {
  if (!structured_) return ReplyDelta{std::string(text), "", {}};
  buf_ += text;
  return format_ == ChatFormat::Qwen35 ? drain_qwen35(false) : drain(false);
}

ReplyDelta ReplyParser::finish() {
  if (!structured_) return {};
  const bool qwen = format_ == ChatFormat::Qwen35;
  ReplyDelta d = qwen ? drain_qwen35(true) : drain(true);
  if (state_ == State::Call) {  // an unfinished call
    d.content += std::string(qwen ? kQwenCallOpen : kCallOpen) + call_;
  }
  call_.clear();
  state_ = State::Content;
  return d;
}

void ReplyParser::end_call(ReplyDelta& d) {
  // call:NAME{ARGS}
  const std::string& c = call_;
  const size_t brace = c.find('{');
  const bool framed = c.rfind("call:", 0) == 0 && brace != std::string::npos && c.back() == '}';
  if (framed) {
    const std::string name = c.substr(5, brace - 5);
    if (auto args = parse_arguments(std::string_view(c).substr(brace + 1, c.size() - brace - 2));
        args && !name.empty()) {
      d.calls.push_back({name, args->dump()});
      call_.clear();
      return;
    }
  }
  d.content += std::string(kCallOpen) + c + std::string(kCallClose);  // not a call we can read
  call_.clear();
}

bool ReplyParser::take_until(std::string_view close, std::string& sink, bool final,
                             bool trim_newlines) {
  skip_newlines();
  const size_t end = buf_.find(close);
  if (end == std::string::npos) {
    size_t keep = final ? 0 : pending_prefix(buf_, {close});
    if (trim_newlines && !final) keep = newlines_before(buf_, buf_.size() - keep);
    sink += buf_.substr(0, buf_.size() - keep);
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  sink += buf_.substr(0, trim_newlines ? end - newlines_in_front(buf_, end) : end);
  buf_.erase(0, end + close.size());
  return true;
}

void ReplyParser::skip_newlines() {
  if (!skip_newlines_) return;
  const size_t n = buf_.find_first_not_of('\n');
  buf_.erase(0, n == std::string::npos ? buf_.size() : n);
  skip_newlines_ = n == std::string::npos;
}

ReplyDelta ReplyParser::drain_qwen35(bool final) {
  ReplyDelta d;
  for (;;) {
    switch (state_) {
      case State::Content: {
        skip_newlines();
        const size_t think = buf_.find(kThinkOpen), call = buf_.find(kQwenCallOpen);
        const size_t at = std::min(think, call);
        if (at == std::string::npos) {
          size_t keep = final ? 0 : pending_prefix(buf_, {kThinkOpen, kQwenCallOpen});
          if (!final) keep = newlines_before(buf_, buf_.size() - keep);
          d.content += buf_.substr(0, buf_.size() - keep);
          buf_.erase(0, buf_.size() - keep);
          return d;
        }
        d.content += buf_.substr(0, at - newlines_in_front(buf_, at));
        const bool is_think = at == think;
        buf_.erase(0, at + (is_think ? kThinkOpen : kQwenCallOpen).size());
        state_ = is_think ? State::Thought : State::Call;
        skip_newlines_ = is_think;
        break;
      }
      case State::Thought:
        if (!take_until(kThinkClose, d.reasoning, final, /*trim_newlines=*/true)) {
          if (final) state_ = State::Content;
          return d;
        }
        state_ = State::Content;
        skip_newlines_ = true;
        break;
      case State::Call: {
        if (!take_until(kQwenCallClose, call_, final)) return d;
        if (auto c = parse_qwen35_call(call_, tools_)) {
          d.calls.push_back({c->name, c->arguments.dump()});
        } else {
          d.content += std::string(kQwenCallOpen) + call_ + std::string(kQwenCallClose);
        }
        call_.clear();
        state_ = State::Content;
        skip_newlines_ = true;
        break;
      }
      case State::ChannelName:
        state_ = State::Content;
        break;
    }
  }
}

ReplyDelta ReplyParser::drain(bool final) {
  ReplyDelta d;
  for (;;) {
    switch (state_) {
      case State::Content: {
        const size_t ch = buf_.find(kChannelOpen), call = buf_.find(kCallOpen);
        const size_t at = std::min(ch, call);
        if (at == std::string::npos) {
          const size_t keep = final ? 0 : pending_prefix(buf_, {kChannelOpen, kCallOpen});
          d.content += buf_.substr(0, buf_.size() - keep);
          buf_.erase(0, buf_.size() - keep);
          return d;
        }
        d.content += buf_.substr(0, at);
        const bool is_channel = at == ch;
        buf_.erase(0, at + (is_channel ? kChannelOpen : kCallOpen).size());
        state_ = is_channel ? State::ChannelName : State::Call;
        break;
      }
      case State::ChannelName: {  // an optional "thought\n" (the published response schema's)
        const size_t n = std::min(buf_.size(), kThoughtName.size());
        if (buf_.compare(0, n, kThoughtName, 0, n) == 0 && n < kThoughtName.size() && !final) {
          return d;  // could still be the name line
        }
        if (n == kThoughtName.size() && buf_.compare(0, n, kThoughtName) == 0) buf_.erase(0, n);
        state_ = State::Thought;
        break;
      }
      case State::Thought:
        if (!take_until(kChannelClose, d.reasoning, final)) {
          if (final) state_ = State::Content;
          return d;
        }
        state_ = State::Content;
        break;
      case State::Call:
        if (!take_until(kCallClose, call_, final)) return d;
        end_call(d);
        state_ = State::Content;
        break;
    }
  }
}

}  // namespace mtp::serve
