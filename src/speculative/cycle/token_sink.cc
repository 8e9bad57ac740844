#include "speculative/cycle/token_sink.h"

#include <algorithm>

namespace mtp::speculative {

namespace {
// Length of the longest prefix of s[0..n) that ends on a UTF-8 character boundary.
size_t utf8_safe_prefix(std::string_view s, size_t n) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}
}  // namespace

std::string StopStringFilter::push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  size_t cut = std::string::npos;  // earliest match of any stop string
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    size_t p = pending_.find(s);
    if (p != std::string::npos) cut = std::min(cut, p);
  }
  std::string out;
  if (cut != std::string::npos) {
    stopped_ = true;
    out = pending_.substr(0, cut);
    pending_.clear();
  } else {
    // Keep back the longest tail that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const auto& s : stops_) {
      if (s.empty()) continue;
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > keep; --k) {
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
      }
    }
    size_t n = utf8_safe_prefix(pending_, pending_.size() - keep);
    out = pending_.substr(0, n);
    pending_.erase(0, n);
  }
  emitted_ += out;
  return out;
}

std::string StopStringFilter::flush() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  emitted_ += out;
  return out;
}

TokenSink::TokenSink(const io::Tokenizer* tok, std::vector<int32_t> stop_ids, int n_new,
                     std::vector<std::string> stop_strings, TextCallback on_text, int32_t prev)
    : tok_(tok), stop_ids_(std::move(stop_ids)), n_new_(n_new), on_text_(std::move(on_text)),
      prev_(prev), filter_(tok ? std::move(stop_strings) : std::vector<std::string>{}) {
  std::sort(stop_ids_.begin(), stop_ids_.end());
  if (n_new_ <= 0) finish_reason_ = "length";
}

void TokenSink::emit(const std::string& s) {
  if (!s.empty() && on_text_) on_text_(s);
}

bool TokenSink::push(int32_t token, const DraftOrigin* drafted) {
  if (done()) return false;
  if (std::binary_search(stop_ids_.begin(), stop_ids_.end(), token)) {
    finish_reason_ = "eos";
    return false;
  }
  last_ = std::chrono::steady_clock::now();
  if (tokens_.empty()) first_ = last_;
  tokens_.push_back(token);
  std::string piece;
  if (tok_) {
    piece = filter_.push(stream_.push(tok_->token_bytes(token, prev_)));
    emit(piece);
    if (filter_.stopped()) finish_reason_ = "stop";
  }
  prev_ = token;
  if (!done() && int(tokens_.size()) >= n_new_) finish_reason_ = "length";
  if (on_token_ && !on_token_(token, drafted, piece)) finish("cancelled");
  return !done();
}

void TokenSink::finish(const char* reason) {
  if (!done()) finish_reason_ = reason;
}

void TokenSink::close() {
  std::string rest;
  if (!filter_.stopped()) rest = filter_.push(stream_.flush());
  rest += filter_.flush();
  emit(rest);
  if (on_token_) on_token_(-1, nullptr, rest);
}

double TokenSink::generation_seconds() const {
  if (tokens_.size() < 2) return 0;
  return std::chrono::duration<double>(last_ - first_).count();
}

}  // namespace mtp::speculative
