// Where generated tokens go, one at a time, in order. The single place that
// applies docs/SEMANTICS.md's stop semantics, shared by plain and speculative
// generation so both end on exactly the same token:
// - a stop token (EOS; BOS for llama2.c) ends generation and is not emitted;
// - `n_new` new tokens end it (finish "length");
// - a stop string ends the text before the match (finish "stop");
// - the caller reports the context limit with finish("context").
// Text is streamed through on_text as complete UTF-8, held back while it could
// still be the start of a stop string.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "speculative/cycle/draft_tree.h"

namespace mtp::speculative {

using TextCallback = std::function<void(std::string_view)>;
// Per-token streaming (the server's events): called once per emitted token
// with its id, who proposed it (null: the target's own choice; else the
// draft's source) and the text it released (complete UTF-8, possibly empty
// while held back); once more at close() with id -1 and the held-back rest.
// Returning false cancels generation (finish "cancelled").
using TokenCallback =
    std::function<bool(int32_t token, const DraftOrigin* drafted, std::string_view text)>;

// Holds back streamed text until no stop string can start in it.
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds text; returns what may be emitted now. Sets stopped() on a match.
  std::string push(std::string_view text);
  std::string flush();  // at the end: everything held back
  bool stopped() const { return stopped_; }
  const std::string& full_text() const { return emitted_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_, emitted_;
  bool stopped_ = false;
};

class TokenSink {
 public:
  // tok may be null (tests with scripted token ids): no text, no stop strings.
  // prev: the last prompt token (for the tokenizer's leading-space rule).
  TokenSink(const io::Tokenizer* tok, std::vector<int32_t> stop_ids, int n_new,
            std::vector<std::string> stop_strings, TextCallback on_text, int32_t prev);

  // Offers the next token. Returns false once generation has ended (the token
  // was a stop token, or it completed n_new / a stop string, or finish() was
  // called); tokens offered after the end are ignored.
  // drafted: the source when the token is an accepted draft (for on_token).
  bool push(int32_t token, const DraftOrigin* drafted = nullptr);
  void set_token_callback(TokenCallback f) { on_token_ = std::move(f); }
  // Ends generation for a reason the sink cannot see (e.g. "context").
  void finish(const char* reason);
  bool done() const { return !finish_reason_.empty(); }
  // Flushes held-back text. Call once at the end.
  void close();

  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::string& text() const { return filter_.full_text(); }
  const std::string& finish_reason() const { return finish_reason_; }
  // Seconds between the first and the last emitted token (generation time).
  double generation_seconds() const;

 private:
  void emit(const std::string& s);

  const io::Tokenizer* tok_;
  std::vector<int32_t> stop_ids_;  // sorted
  int n_new_;
  TextCallback on_text_;
  TokenCallback on_token_;
  int32_t prev_;
  StopStringFilter filter_;
  io::TextStream stream_;
  std::vector<int32_t> tokens_;
  std::string finish_reason_;
  std::chrono::steady_clock::time_point first_{}, last_{};
};

}  // namespace mtp::speculative
