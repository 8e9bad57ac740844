#include "serve/reply_parser.h"

#include "serve/gemma4_chat.h"

namespace mtp::serve {

namespace {

constexpr std::string_view kChannelOpen = "<|channel>", kChannelClose = "<channel|>",
                           kCallOpen = "<|tool_call>", kCallClose = "<tool_call|>",
                           kThoughtName = "thought\n";

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

}  // namespace

void ReplyDelta::append(ReplyDelta d) {
  content += d.content;
  reasoning += d.reasoning;
  for (auto& c : d.calls) calls.push_back(std::move(c));
}

ReplyDelta ReplyParser::feed(std::string_view text) {
  if (!structured_) return ReplyDelta{std::string(text), "", {}};
  buf_ += text;
  return drain(false);
}

ReplyDelta ReplyParser::finish() {
  if (!structured_) return {};
  ReplyDelta d = drain(true);
  if (state_ == State::Call) d.content += std::string(kCallOpen) + call_;  // unfinished call
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

bool ReplyParser::take_until(std::string_view close, std::string& sink, bool final) {
  const size_t end = buf_.find(close);
  if (end == std::string::npos) {
    const size_t keep = final ? 0 : pending_prefix(buf_, {close});
    sink += buf_.substr(0, buf_.size() - keep);
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  sink += buf_.substr(0, end);
  buf_.erase(0, end + close.size());
  return true;
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
