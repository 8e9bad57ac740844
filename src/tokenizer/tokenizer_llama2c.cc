#include "tokenizer/tokenizer_llama2c.h"

#include <cmath>
#include <cstring>
#include <queue>

#include "core/error.h"
#include "core/mapped_file.h"

namespace mtp::io {
namespace {

// A token record longer than this is certainly corruption, not a real piece.
constexpr int32_t kMaxPieceBytes = 1 << 16;

}  // namespace

Llama2cTokenizer::Llama2cTokenizer(const std::string& path) : path_(path) {
  const std::string data = read_file(path);  // IoError when missing
  size_t off = 0;
  auto take = [&](void* dst, size_t n, const char* what) {
    if (data.size() - off < n) {
      fail<IoError>("llama2.c tokenizer '{}' is truncated: {} at byte {} needs {} bytes, {} left",
                    path, what, off, n, data.size() - off);
    }
    std::memcpy(dst, data.data() + off, n);
    off += n;
  };
  take(&max_token_length_, 4, "header");
  if (max_token_length_ <= 0 || max_token_length_ > kMaxPieceBytes) {
    fail<FormatError>("llama2.c tokenizer '{}': max_token_length {} is not plausible", path,
                      max_token_length_);
  }
  while (off < data.size()) {
    float score;
    int32_t len;
    take(&score, 4, "token score");
    take(&len, 4, "token length");
    if (len < 0 || len > kMaxPieceBytes) {
      fail<FormatError>("llama2.c tokenizer '{}': token {} has length {} (at byte {})", path,
                        pieces_.size(), len, off - 4);
    }
    if (!std::isfinite(score)) {
      fail<FormatError>("llama2.c tokenizer '{}': token {} has non-finite score", path,
                        pieces_.size());
    }
    std::string piece(size_t(len), '\0');
    take(piece.data(), size_t(len), "token bytes");
    pieces_.push_back(std::move(piece));
    scores_.push_back(score);
  }
  if (pieces_.size() <= size_t(kEos)) {
    fail<FormatError>("llama2.c tokenizer '{}' has only {} tokens (needs at least BOS and EOS)",
                      path, pieces_.size());
  }
  bytes_.resize(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    index_.emplace(pieces_[id], int32_t(id));  // first id wins for duplicates
    const int b = detail::parse_byte_piece(pieces_[id]);
    if (b >= 0) {
      bytes_[id] = std::string(1, char(b));
    } else if (id != size_t(kBos) && id != size_t(kEos)) {
      bytes_[id] = pieces_[id];
    }
  }
}

int32_t Llama2cTokenizer::lookup(std::string_view s) const {
  auto it = index_.find(s);
  return it == index_.end() ? -1 : it->second;
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool add_special) const {
  detail::require_valid_utf8(text);
  std::vector<int32_t> toks;
  toks.reserve(text.size() + 2);
  // run.c keeps BOS in the token list while merging; so do we (it never merges
  // in practice, but the pair is considered exactly as upstream).
  if (add_special) toks.push_back(kBos);
  if (!text.empty()) {
    const int32_t dummy = lookup(" ");
    if (dummy >= 0) toks.push_back(dummy);
  }
  for (size_t i = 0; i < text.size();) {
    const size_t n = detail::utf8_len_at(text, i);  // >0: text is valid
    const int32_t id = lookup(text.substr(i, n));
    if (id >= 0) {
      toks.push_back(id);
    } else {
      for (size_t k = 0; k < n; ++k) {
        const int32_t b = int32_t(uint8_t(text[i + k])) + 3;
        toks.push_back(b < vocab_size() ? b : 0);  // tiny vocab without byte pieces: <unk>
      }
    }
    i += n;
  }

  // Greedy merging with a max-heap over adjacent pairs. Stale entries (a side
  // already merged away) are detected by comparing the stored ids.
  struct Cand {
    float score;
    int32_t pos, left, right, merged;
  };
  auto worse = [](const Cand& a, const Cand& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.pos > b.pos;  // ties: leftmost first, like run.c's strict '>'
  };
  const size_t n = toks.size();
  std::vector<int32_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
    prev[i] = int32_t(i) - 1;
  }
  std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
  std::string buf;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || next[size_t(pos)] < 0) return;
    const int32_t l = toks[size_t(pos)], r = toks[size_t(next[size_t(pos)])];
    buf.assign(pieces_[size_t(l)]);
    buf.append(pieces_[size_t(r)]);
    const int32_t m = lookup(buf);
    if (m >= 0) heap.push({scores_[size_t(m)], pos, l, r, m});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(int32_t(i));
  std::vector<bool> dead(n, false);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const auto p = size_t(c.pos);
    if (dead[p] || next[p] < 0) continue;
    const auto q = size_t(next[p]);
    if (toks[p] != c.left || toks[q] != c.right) continue;
    toks[p] = c.merged;
    dead[q] = true;
    next[p] = next[q];
    if (next[q] >= 0) prev[size_t(next[q])] = int32_t(p);
    consider(prev[p]);
    consider(int32_t(p));
  }
  std::vector<int32_t> out;
  out.reserve(n + 1);
  for (int32_t i = n ? 0 : -1; i >= 0; i = next[size_t(i)]) out.push_back(toks[size_t(i)]);
  // No EOS: run.c's generate() encodes prompts with bos=1, eos=0.
  return out;
}

std::string Llama2cTokenizer::token_bytes(int32_t id, int32_t prev) const {
  if (id < 0 || id >= vocab_size()) return std::string(kNoPiece);
  const std::string& b = bytes_[size_t(id)];
  if (prev == kBos && !b.empty() && b[0] == ' ') return b.substr(1);
  return b;
}

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path) {
  return std::make_unique<Llama2cTokenizer>(path);
}

}  // namespace mtp::io
