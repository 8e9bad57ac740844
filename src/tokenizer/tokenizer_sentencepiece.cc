#include "tokenizer/tokenizer_sentencepiece.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer_text.h"

namespace mtp::io {
namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 '▁'

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size())) {
    s.replace(i, from.size(), to);
  }
  return s;
}

// Minimal protobuf wire-format reader: varints, fixed32 and length-delimited
// fields, which is all ModelProto uses. Running past the end means the file
// was cut short (IoError); an impossible wire type means it is not a model.
class Wire {
 public:
  Wire(std::string_view data, const std::string& path) : d_(data), path_(path) {}
  bool done() const { return pos_ >= d_.size(); }

  // Next field: number and wire type.
  std::pair<uint64_t, int> key() {
    const uint64_t k = varint();
    const int wt = int(k & 7);
    if (wt != 0 && wt != 1 && wt != 2 && wt != 5) {
      fail<FormatError>("'{}' is not a SentencePiece model: bad protobuf wire type {} at byte {}",
                        path_, wt, pos_);
    }
    return {k >> 3, wt};
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto b = uint8_t(d_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail<FormatError>("'{}' is not a SentencePiece model: overlong varint", path_);
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    need(n);
    const std::string_view s = d_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return s;
  }
  float fixed32_float() {
    need(4);
    float f;
    std::memcpy(&f, d_.data() + pos_, 4);  // little-endian, as protobuf
    pos_ += 4;
    return f;
  }
  void skip(int wt) {
    if (wt == 0) {
      varint();
    } else if (wt == 1 || wt == 5) {
      need(wt == 1 ? 8 : 4);
      pos_ += wt == 1 ? 8 : 4;
    } else {
      bytes();
    }
  }

 private:
  void need(uint64_t n) const {
    if (n > d_.size() - pos_) {
      fail<IoError>(
          "SentencePiece model '{}' is truncated or corrupt: a field at byte {} needs {} bytes",
          path_, pos_, n);
    }
  }
  std::string_view d_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path) : path_(path) {
  parse(read_file(path));  // IoError when missing
  build();

  const detail::TokenizerConfig cfg = detail::read_tokenizer_config(detail::config_path_for(path));
  if (cfg.add_bos_token) add_bos_ = *cfg.add_bos_token;
  if (cfg.add_eos_token) add_eos_ = *cfg.add_eos_token;
  auto known = [&](const std::string& text) {
    auto it = reserved_.find(text);
    if (it != reserved_.end()) return it->second;
    return lookup(text);
  };
  if (cfg.bos_token && bos_ < 0) bos_ = known(*cfg.bos_token);
  if (cfg.eos_token) {
    const int32_t id = known(*cfg.eos_token);
    if (id >= 0 && std::find(eos_.begin(), eos_.end(), id) == eos_.end()) eos_.push_back(id);
  }
}

SentencePieceTokenizer::SentencePieceTokenizer(Spec spec) : path_(std::move(spec.source)) {
  if (spec.pieces.empty()) fail<FormatError>("{}: the vocabulary is empty", path_);
  if (spec.scores.size() != spec.pieces.size() || spec.types.size() != spec.pieces.size()) {
    fail<FormatError>("{}: {} pieces but {} scores and {} types", path_, spec.pieces.size(),
                      spec.scores.size(), spec.types.size());
  }
  pieces_.reserve(spec.pieces.size());
  for (size_t i = 0; i < spec.pieces.size(); ++i) {
    if (spec.types[i] == PieceType::Byte) byte_fallback_ = true;
    pieces_.push_back({std::move(spec.pieces[i]), spec.scores[i], spec.types[i]});
  }
  bpe_ = true;
  add_dummy_prefix_ = spec.add_dummy_prefix;
  remove_extra_whitespaces_ = spec.remove_extra_whitespaces;
  escape_whitespaces_ = true;
  add_bos_ = spec.add_bos;
  add_eos_ = spec.add_eos;
  bos_ = spec.bos;
  eos_ = std::move(spec.eos);
  user_defined_raw_ = spec.user_defined_in_raw_text;
  if (spec.unk < -1 || spec.unk >= int32_t(pieces_.size())) {
    fail<FormatError>("{}: unknown id {} is outside the vocabulary of {} pieces", path_, spec.unk,
                      pieces_.size());
  }
  build(spec.unk);
}

void SentencePieceTokenizer::build(std::optional<int32_t> unk) {
  const std::string& path = path_;
  std::vector<AddedTokenMatcher::Token> specials, user;
  bytes_.resize(pieces_.size());
  byte_ids_.fill(-1);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto id = int32_t(i);
    const Piece& p = pieces_[i];
    const bool mergeable = p.type == PieceType::Normal || p.type == PieceType::UserDefined ||
                           p.type == PieceType::Unused;
    // sentencepiece rejects models with duplicate pieces; so do we.
    if (!(mergeable ? mergeable_ : reserved_).emplace(p.text, id).second) {
      fail<FormatError>("SentencePiece model '{}': piece '{}' is defined twice", path, p.text);
    }
    switch (p.type) {
      case PieceType::Control:
        if (!p.text.empty()) specials.push_back({p.text, id});
        break;
      case PieceType::Unknown:
        unk_ = id;
        bytes_[i] = " \xE2\x81\x87 ";  // " ⁇ "
        if (!p.text.empty()) specials.push_back({p.text, id});
        break;
      case PieceType::Byte: {
        const int b = detail::parse_byte_piece(p.text);
        if (b < 0)
          fail<FormatError>("SentencePiece model '{}': byte piece {} is '{}'", path, id, p.text);
        byte_ids_[size_t(b)] = id;
        bytes_[i] = std::string(1, char(b));
        break;
      }
      case PieceType::UserDefined:
        (user_defined_raw_ ? specials : user).push_back({p.text, id});
        [[fallthrough]];
      default:
        bytes_[i] = replace_all(p.text, kMetaspace, " ");
    }
  }
  if (unk_ < 0) {
    if (!unk) fail<FormatError>("SentencePiece model '{}' has no unknown piece", path);
    unk_ = *unk;
  }
  specials_ = std::make_unique<AddedTokenMatcher>(std::move(specials));
  build_pairs();
  user_defined_ = std::make_unique<AddedTokenMatcher>(std::move(user));
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::parse(const std::string& data) {
  std::string bos_piece = "<s>", eos_piece = "</s>";
  Wire w(data, path_);
  while (!w.done()) {
    const auto [field, wt] = w.key();
    if (field == 1 && wt == 2) {  // repeated SentencePiece pieces
      Wire p(w.bytes(), path_);
      Piece piece{{}, 0.0f, PieceType::Normal};
      while (!p.done()) {
        const auto [f, t] = p.key();
        if (f == 1 && t == 2) {
          piece.text = std::string(p.bytes());
        } else if (f == 2 && t == 5) {
          piece.score = p.fixed32_float();
        } else if (f == 3 && t == 0) {
          const uint64_t type = p.varint();
          if (type < 1 || type > 6)
            fail<FormatError>("'{}': piece type {} is unknown", path_, type);
          piece.type = PieceType(type);
        } else {
          p.skip(t);
        }
      }
      pieces_.push_back(std::move(piece));
    } else if (field == 2 && wt == 2) {  // TrainerSpec
      Wire t(w.bytes(), path_);
      int64_t model_type = 1;  // proto default: UNIGRAM
      while (!t.done()) {
        const auto [f, ty] = t.key();
        if (f == 3 && ty == 0) {
          model_type = int64_t(t.varint());
        } else if (f == 35 && ty == 0) {
          byte_fallback_ = t.varint() != 0;
        } else if (f == 24 && ty == 0) {
          if (t.varint() != 0) {
            fail<ConfigError>(
                "SentencePiece model '{}': treat_whitespace_as_suffix is not supported", path_);
          }
        } else if (f == 46 && ty == 2) {
          bos_piece = std::string(t.bytes());
        } else if (f == 47 && ty == 2) {
          eos_piece = std::string(t.bytes());
        } else {
          t.skip(ty);
        }
      }
      bpe_ = model_type == 2;
      if (!bpe_) {
        fail<ConfigError>("SentencePiece model '{}': model_type {} is not supported (only BPE = 2)",
                          path_, model_type);
      }
    } else if (field == 3 && wt == 2) {  // NormalizerSpec
      Wire n(w.bytes(), path_);
      std::string name;
      while (!n.done()) {
        const auto [f, ty] = n.key();
        if (f == 1 && ty == 2) {
          name = std::string(n.bytes());
        } else if (f == 2 && ty == 2) {
          if (!n.bytes().empty()) {
            fail<ConfigError>(
                "SentencePiece model '{}': normalizer '{}' (precompiled charsmap) is not supported",
                path_, name);
          }
        } else if (f == 3 && ty == 0) {
          add_dummy_prefix_ = n.varint() != 0;
        } else if (f == 4 && ty == 0) {
          remove_extra_whitespaces_ = n.varint() != 0;
        } else if (f == 5 && ty == 0) {
          escape_whitespaces_ = n.varint() != 0;
        } else {
          n.skip(ty);
        }
      }
    } else {
      w.skip(wt);
    }
  }
  if (pieces_.empty()) fail<FormatError>("'{}' is not a SentencePiece model (no pieces)", path_);
  if (!bpe_) fail<FormatError>("'{}' is not a SentencePiece model (no trainer spec)", path_);
  // libsentencepiece's bos_id()/eos_id(): the named piece, if it is a control piece.
  for (size_t i = 0; i < pieces_.size(); ++i) {
    if (pieces_[i].type != PieceType::Control) continue;
    if (pieces_[i].text == bos_piece) bos_ = int32_t(i);
    if (pieces_[i].text == eos_piece) eos_.insert(eos_.begin(), int32_t(i));
  }
}

int32_t SentencePieceTokenizer::lookup(std::string_view piece) const {
  auto it = mergeable_.find(piece);
  return it == mergeable_.end() ? -1 : it->second;
}

// sentencepiece's Normalizer::Normalize for the identity rule: optional
// removal of leading/trailing/repeated spaces, the dummy "▁" prefix, and
// ' ' -> '▁'. Empty (or all-space, when removing) input stays empty.
std::string SentencePieceTokenizer::normalize(std::string_view text) const {
  size_t i = 0;
  if (remove_extra_whitespaces_) {
    while (i < text.size() && text[i] == ' ') ++i;
  }
  std::string out;
  if (i == text.size()) return out;
  const std::string_view ws = escape_whitespaces_ ? kMetaspace : std::string_view(" ");
  out.reserve((text.size() - i) * 3 / 2 + 3);
  if (add_dummy_prefix_) out += ws;
  bool prev_space = remove_extra_whitespaces_;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ') {
      if (prev_space) continue;
      out += ws;
      prev_space = remove_extra_whitespaces_;
    } else {
      out += c;
      prev_space = false;
    }
  }
  if (remove_extra_whitespaces_) {
    while (out.size() >= ws.size() && out.compare(out.size() - ws.size(), ws.size(), ws) == 0) {
      out.resize(out.size() - ws.size());
    }
  }
  return out;
}

// Heap key of a merge: higher score first, so the score's order is inverted
// into an unsigned rank (IEEE bits made monotonic, then complemented).
uint32_t SentencePieceTokenizer::rank_of(float score) {
  uint32_t bits;
  std::memcpy(&bits, &score, 4);
  const uint32_t monotonic = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~monotonic;
}

// Every way a mergeable piece splits into two mergeable pieces, so merging
// can look pairs up by id instead of hashing concatenated strings.
void SentencePieceTokenizer::build_pairs() {
  pairs_.reserve(mergeable_.size() * 2);
  for (const auto& [text, id] : mergeable_) {
    for (size_t k = 1; k < text.size(); ++k) {
      const int32_t l = lookup(std::string_view(text).substr(0, k));
      const int32_t r = l < 0 ? -1 : lookup(std::string_view(text).substr(k));
      if (r >= 0) pairs_.insert_or_assign(PairTable::key(l, r), int32_t(rank_of(score(id))), id);
    }
  }
}

// bpe_model.cc Model::Encode: characters (user-defined pieces frozen whole),
// then repeatedly merge the adjacent pair whose concatenation is a piece with
// the highest score (ties: leftmost), via a heap; pieces of type UNUSED are
// split back into the pair that formed them; what is not a piece becomes
// <unk> or, with byte fallback, its bytes.
void SentencePieceTokenizer::encode_plain(std::string_view raw, std::vector<int32_t>& out) const {
  const std::string text = normalize(raw);
  if (text.empty()) return;
  const std::string_view tv(text);
  struct Symbol {
    int32_t id;  // piece id, -1 for a character that is no piece
    int32_t prev, next;
    uint32_t begin, len;  // span of `text`; len 0 = merged away
    bool frozen;
  };
  std::vector<Symbol> syms;
  syms.reserve(text.size());
  auto add = [&](size_t b, size_t n, bool frozen) {
    const auto i = int32_t(syms.size());
    syms.push_back({lookup(tv.substr(b, n)), i - 1, i + 1, uint32_t(b), uint32_t(n), frozen});
  };
  size_t pos = 0;
  auto chars_until = [&](size_t end) {
    while (pos < end) {
      const size_t n = std::max<size_t>(1, detail::utf8_len_at(text, pos));
      add(pos, n, false);
      pos += n;
    }
  };
  for (const auto& m : user_defined_->find_all(text)) {
    chars_until(m.begin);
    add(m.begin, m.end - m.begin, true);
    pos = m.end;
  }
  chars_until(text.size());
  syms.back().next = -1;
  auto span = [&](const Symbol& s) { return tv.substr(s.begin, s.len); };

  // Rank and merged id of the pair starting at symbol `l`, or -1 rank.
  auto pair_at = [&](int32_t l, int32_t* merged) -> int64_t {
    if (l < 0) return -1;
    const Symbol& a = syms[size_t(l)];
    if (a.len == 0 || a.next < 0) return -1;
    const Symbol& b = syms[size_t(a.next)];
    if (a.frozen || b.frozen) return -1;
    if (a.id >= 0 && b.id >= 0) {
      const PairTable::Entry* e = pairs_.find(PairTable::key(a.id, b.id));
      if (!e) return -1;
      *merged = e->merged;
      return int64_t(uint32_t(e->rank));
    }
    *merged = lookup(tv.substr(a.begin, a.len + b.len));  // a side is not a piece: rare
    return *merged < 0 ? -1 : int64_t(rank_of(score(*merged)));
  };
  std::vector<uint64_t> heap;
  heap.reserve(syms.size());
  const std::greater<uint64_t> later;
  detail::StringMap<std::pair<std::string_view, std::string_view>> rev_merge;
  int32_t merged = -1;
  auto maybe_add = [&](int32_t l, bool push) {
    const int64_t rank = pair_at(l, &merged);
    if (rank < 0) return;
    heap.push_back((uint64_t(rank) << 32) | uint32_t(l));
    if (push) std::push_heap(heap.begin(), heap.end(), later);
    if (pieces_[size_t(merged)].type == PieceType::Unused) {
      const Symbol& a = syms[size_t(l)];
      rev_merge.insert_or_assign(std::string(tv.substr(a.begin, a.len + syms[size_t(a.next)].len)),
                                 std::make_pair(span(a), span(syms[size_t(a.next)])));
    }
  };
  for (size_t i = 0; i + 1 < syms.size(); ++i) maybe_add(int32_t(i), false);
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto l = int32_t(uint32_t(top));
    if (pair_at(l, &merged) != int64_t(top >> 32)) continue;  // stale
    Symbol& a = syms[size_t(l)];
    Symbol& b = syms[size_t(a.next)];
    a.id = merged;
    a.len += b.len;
    a.next = b.next;
    if (b.next >= 0) syms[size_t(b.next)].prev = l;
    b.len = 0;
    maybe_add(a.prev, true);
    maybe_add(l, true);
  }

  auto unk_of = [&](std::string_view w) {
    if (unk_ < 0) {
      fail<InputError>("{}: the text '{}' has no piece, no byte piece and the vocabulary no "
                       "unknown token", path_, w.substr(0, 40));
    }
    return unk_;
  };
  auto emit = [&](auto&& self, std::string_view w, int32_t id) -> void {
    if (id >= 0 && pieces_[size_t(id)].type == PieceType::Unused) {
      auto it = rev_merge.find(w);
      if (it != rev_merge.end()) {
        self(self, it->second.first, lookup(it->second.first));
        self(self, it->second.second, lookup(it->second.second));
        return;
      }
    }
    if (id < 0) {
      auto it = reserved_.find(w);
      if (it != reserved_.end()) id = it->second;
    }
    if (id >= 0 && id != unk_ && pieces_[size_t(id)].type != PieceType::Unused) {
      out.push_back(id);
    } else if (byte_fallback_) {
      for (char c : w) out.push_back(byte_ids_[uint8_t(c)] >= 0 ? byte_ids_[uint8_t(c)] : unk_of(w));
    } else {
      out.push_back(unk_of(w));
    }
  };
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next)
    emit(emit, span(syms[size_t(i)]), syms[size_t(i)].id);
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_special) const {
  detail::require_valid_utf8(text);
  std::vector<int32_t> out;
  if (add_special && adds_bos()) out.push_back(bos_);
  specials_->encode_around(text, out, [&](std::string_view run, bool) { encode_plain(run, out); });
  if (add_special && add_eos_ && !eos_.empty()) out.push_back(eos_.front());
  return out;
}

std::string SentencePieceTokenizer::token_bytes(int32_t id, int32_t prev) const {
  if (id < 0 || id >= vocab_size()) return std::string(kNoPiece);
  const std::string& b = bytes_[size_t(id)];
  if (add_dummy_prefix_ && (prev < 0 || prev == bos_) && !b.empty() && b[0] == ' ')
    return b.substr(1);
  return b;
}

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::string& path) {
  try {
    return std::make_unique<SentencePieceTokenizer>(path);
  } catch (const ConfigError&) {
    // A model kind the native reader does not implement (Unigram, charsmap
    // normalizer): libsentencepiece handles every kind.
    return load_libsentencepiece_tokenizer(path);
  }
}

}  // namespace mtp::io
