#include "tokenizer/tokenizer_text.h"

#include <unicode/bytestream.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/tokenizer_regex.h"

namespace mtp::io {
namespace {

using json = nlohmann::json;

// The pattern of GPT-2's ByteLevel pre-tokenizer.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool is_space_cp(std::string_view s, size_t i) {
  size_t j = i;
  return u_isUWhiteSpace(UChar32(detail::next_codepoint(s, j)));
}

}  // namespace

// ---------------------------------------------------------------- added tokens

AddedTokenMatcher::AddedTokenMatcher(std::vector<Token> tokens) : tokens_(std::move(tokens)) {
  terminal_.push_back(-1);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& c = tokens_[t].content;
    if (c.empty()) continue;
    starts_[uint8_t(c[0])] = true;
    int32_t node = 0;
    for (char ch : c) {
      const uint64_t key = (uint64_t(node) << 8) | uint8_t(ch);
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        terminal_.push_back(-1);
        it = edges_.emplace(key, int32_t(terminal_.size() - 1)).first;
      }
      node = it->second;
    }
    if (terminal_[size_t(node)] < 0) terminal_[size_t(node)] = int32_t(t);  // first duplicate wins
  }
}

std::vector<AddedTokenMatcher::Match> AddedTokenMatcher::find_all(std::string_view text) const {
  std::vector<Match> out;
  size_t last_end = 0;
  for (size_t i = 0; i < text.size();) {
    if (!starts_[uint8_t(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find((uint64_t(node) << 8) | uint8_t(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_[size_t(node)] >= 0) {
        best = terminal_[size_t(node)];
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const Token& tok = tokens_[size_t(best)];
    if (tok.single_word) {
      // Not glued to a letter/digit on either side.
      bool glued = false;
      if (i > 0) {
        size_t k = i - 1;
        while (k > 0 && (uint8_t(text[k]) & 0xC0) == 0x80) --k;
        glued = u_isalnum(UChar32(detail::next_codepoint(text, k)));
      }
      if (!glued && best_end < text.size()) {
        size_t k = best_end;
        glued = u_isalnum(UChar32(detail::next_codepoint(text, k)));
      }
      if (glued) {
        ++i;
        continue;
      }
    }
    size_t begin = i, end = best_end;
    if (tok.lstrip) {
      while (begin > last_end) {
        size_t k = begin - 1;
        while (k > last_end && (uint8_t(text[k]) & 0xC0) == 0x80) --k;
        if (!is_space_cp(text, k)) break;
        begin = k;
      }
    }
    if (tok.rstrip) {
      while (end < text.size() && is_space_cp(text, end))
        end += std::max<size_t>(1, detail::utf8_len_at(text, end));
    }
    out.push_back({begin, end, tok.id});
    last_end = end;
    i = end;
  }
  return out;
}

// ---------------------------------------------------------------- patterns

struct TextPattern::Regex {
  explicit Regex(const std::string& p) : re(p) {}
  BoundedRegex re;
};

TextPattern::~TextPattern() = default;
TextPattern::TextPattern(TextPattern&&) noexcept = default;
TextPattern& TextPattern::operator=(TextPattern&&) noexcept = default;

TextPattern TextPattern::literal(std::string s) {
  TextPattern p;
  p.literal_ = std::move(s);
  return p;
}

TextPattern TextPattern::regex(const std::string& pattern) {
  TextPattern p;
  p.re_ = std::make_unique<Regex>(pattern);
  return p;
}

TextPattern TextPattern::from_json(const json& j, const std::string& source) {
  if (j.is_object() && j.contains("String") && j["String"].is_string())
    return literal(j["String"].get<std::string>());
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string())
    return regex(j["Regex"].get<std::string>());
  fail<FormatError>("{}: pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}", source,
                    json_excerpt(j));
}

std::vector<std::pair<size_t, size_t>> TextPattern::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (!re_) {
    if (literal_.empty()) return out;
    for (size_t i = text.find(literal_); i != std::string_view::npos;
         i = text.find(literal_, i + literal_.size())) {
      out.emplace_back(i, i + literal_.size());
    }
    return out;
  }
  return re_->re.find_all(text);
}

// ---------------------------------------------------------------- normalizers

namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string apply(std::string_view text) const override {
    std::string s(text);
    for (const auto& n : steps_) s = n->apply(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// HF Prepend: only non-empty text gets the prefix.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : p_(std::move(p)) {}
  std::string apply(std::string_view text) const override {
    return text.empty() ? std::string() : p_ + std::string(text);
  }

 private:
  std::string p_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(TextPattern pat, std::string content)
      : pat_(std::move(pat)), content_(std::move(content)) {}
  std::string apply(std::string_view text) const override {
    std::string out;
    size_t pos = 0;
    for (const auto& [b, e] : pat_.find_all(text)) {
      out.append(text.substr(pos, b - pos));
      out.append(content_);
      pos = e;
    }
    out.append(text.substr(pos));
    return out;
  }

 private:
  TextPattern pat_;
  std::string content_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(const icu::Normalizer2* n) : n_(n) {}
  std::string apply(std::string_view text) const override {
    UErrorCode st = U_ZERO_ERROR;
    const icu::StringPiece sp(text.data(), int32_t(text.size()));
    if (n_->isNormalizedUTF8(sp, st) && U_SUCCESS(st)) return std::string(text);
    st = U_ZERO_ERROR;
    std::string out;
    icu::StringByteSink<std::string> sink(&out);
    n_->normalizeUTF8(0, sp, sink, nullptr, st);
    if (U_FAILURE(st)) fail<InputError>("Unicode normalization failed: {}", u_errorName(st));
    return out;
  }

 private:
  const icu::Normalizer2* n_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string apply(std::string_view text) const override {
    icu::UnicodeString us =
        icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), int32_t(text.size())));
    us.toLower(icu::Locale::getRoot());
    std::string out;
    us.toUTF8String(out);
    return out;
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string apply(std::string_view text) const override {
    size_t b = 0, e = text.size();
    while (left_ && b < e && is_space_cp(text, b))
      b += std::max<size_t>(1, detail::utf8_len_at(text, b));
    while (right_ && e > b) {
      size_t k = e - 1;
      while (k > b && (uint8_t(text[k]) & 0xC0) == 0x80) --k;
      if (!is_space_cp(text, k)) break;
      e = k;
    }
    return std::string(text.substr(b, e - b));
  }

 private:
  bool left_, right_;
};

std::string type_of(const json& j, const std::string& source, const char* what) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    fail<FormatError>("{}: {} without a \"type\"", source, what);
  }
  return j["type"].get<std::string>();
}

std::string str_field(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j[key].is_string())
    fail<FormatError>("{}: \"{}\" missing or not a string", source, key);
  return j[key].get<std::string>();
}

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& source) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, source, "normalizer");
  UErrorCode st = U_ZERO_ERROR;
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      fail<FormatError>("{}: Sequence normalizer without \"normalizers\"", source);
    }
    for (const auto& s : j["normalizers"]) {
      if (auto n = make_normalizer(s, source)) steps.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(str_field(j, "prepend", source));
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(
        TextPattern::from_json(j.value("pattern", json()), source),
        str_field(j, "content", source));
  }
  const icu::Normalizer2* n = nullptr;
  if (type == "NFC") n = icu::Normalizer2::getNFCInstance(st);
  if (type == "NFD") n = icu::Normalizer2::getNFDInstance(st);
  if (type == "NFKC") n = icu::Normalizer2::getNFKCInstance(st);
  if (type == "NFKD") n = icu::Normalizer2::getNFKDInstance(st);
  if (n && U_SUCCESS(st)) return std::make_unique<UnicodeNormalizer>(n);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(j.value("strip_left", true),
                                             j.value("strip_right", true));
  fail<ConfigError>("{}: normalizer type '{}' is not supported", source, type);
}

// ---------------------------------------------------------------- pre-tokenizers

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& s, const std::string& source) {
  if (s == "Removed") return Behavior::Removed;
  if (s == "Isolated") return Behavior::Isolated;
  if (s == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::MergedWithNext;
  if (s == "Contiguous") return Behavior::Contiguous;
  fail<FormatError>("{}: unknown split behavior '{}'", source, s);
}

// HF NormalizedString::split: the text is cut into alternating (range,
// is_match) spans, then the behavior decides what becomes a piece.
void split_into(const Piece& p, const TextPattern& pat, Behavior beh, bool invert,
                std::vector<Piece>& out) {
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t pos = 0;
  for (const auto& [b, e] : pat.find_all(p.text)) {
    if (b > pos) spans.push_back({pos, b, invert});
    spans.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < p.text.size()) spans.push_back({pos, p.text.size(), invert});

  std::vector<Span> res;
  bool prev_match = false;
  switch (beh) {
    case Behavior::Removed:
      for (const auto& s : spans) {
        if (!s.match) res.push_back(s);
      }
      break;
    case Behavior::Isolated:
      res = spans;
      break;
    case Behavior::MergedWithPrevious:
      for (const auto& s : spans) {
        if (s.match && !prev_match && !res.empty()) {
          res.back().e = s.e;
        } else {
          res.push_back(s);
        }
        prev_match = s.match;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !prev_match && !res.empty()) {
          res.back().b = it->b;
        } else {
          res.push_back(*it);
        }
        prev_match = it->match;
      }
      std::reverse(res.begin(), res.end());
      break;
    case Behavior::Contiguous:
      for (size_t k = 0; k < spans.size(); ++k) {
        if (k > 0 && spans[k].match == prev_match) {
          res.back().e = spans[k].e;
        } else {
          res.push_back(spans[k]);
        }
        prev_match = spans[k].match;
      }
      break;
  }
  for (const auto& s : res) {
    if (s.e > s.b) out.push_back({p.text.substr(s.b, s.e - s.b), p.first && s.b == 0});
  }
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(TextPattern pat, Behavior beh, bool invert)
      : pat_(std::move(pat)), beh_(beh), invert_(invert) {}
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const auto& p : pieces) split_into(p, pat_, beh_, invert_, out);
    pieces = std::move(out);
  }

 private:
  TextPattern pat_;
  Behavior beh_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        use_regex_(use_regex),
        re_(TextPattern::regex(kGpt2Pattern)) {}
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (auto& p : pieces) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      if (use_regex_) {
        split_into(p, re_, Behavior::Isolated, false, out);
      } else {
        out.push_back(std::move(p));
      }
    }
    pieces = std::move(out);
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_, use_regex_;
  TextPattern re_;
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  MetaspacePreTokenizer(std::string repl, Prepend prepend, bool split)
      : repl_(std::move(repl)),
        prepend_(prepend),
        split_(split),
        sep_(TextPattern::literal(repl_)) {}
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (auto& p : pieces) {
      std::string s;
      for (char c : p.text) {
        if (c == ' ') {
          s += repl_;
        } else {
          s += c;
        }
      }
      const bool has = s.rfind(repl_, 0) == 0;
      if (!has && (prepend_ == Prepend::Always || (prepend_ == Prepend::First && p.first)))
        s.insert(0, repl_);
      Piece q{std::move(s), p.first};
      if (split_) {
        split_into(q, sep_, Behavior::MergedWithNext, false, out);
      } else {
        out.push_back(std::move(q));
      }
    }
    pieces = std::move(out);
  }

 private:
  std::string repl_;
  Prepend prepend_;
  bool split_;
  TextPattern sep_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void apply(std::vector<Piece>& pieces) const override {
    for (const auto& s : steps_) s->apply(pieces);
  }
  bool byte_level() const override {
    for (const auto& s : steps_) {
      if (s->byte_level()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, use_regex);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& source) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, source, "pre_tokenizer");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      fail<FormatError>("{}: Sequence pre_tokenizer without \"pretokenizers\"", source);
    }
    for (const auto& s : j["pretokenizers"]) {
      if (auto p = make_pre_tokenizer(s, source)) steps.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        TextPattern::from_json(j.value("pattern", json()), source),
        parse_behavior(str_field(j, "behavior", source), source), j.value("invert", false));
  }
  if (type == "ByteLevel")
    return make_byte_level_pre_tokenizer(j.value("add_prefix_space", true),
                                         j.value("use_regex", true));
  if (type == "Metaspace") {
    auto scheme = MetaspacePreTokenizer::Prepend::Always;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      const std::string s = j["prepend_scheme"].get<std::string>();
      if (s == "first")
        scheme = MetaspacePreTokenizer::Prepend::First;
      else if (s == "never")
        scheme = MetaspacePreTokenizer::Prepend::Never;
      else if (s != "always")
        fail<FormatError>("{}: unknown Metaspace prepend_scheme '{}'", source, s);
    } else if (!j.value("add_prefix_space", true)) {
      scheme = MetaspacePreTokenizer::Prepend::Never;
    }
    return std::make_unique<MetaspacePreTokenizer>(
        j.value("replacement", std::string("\xE2\x96\x81")), scheme, j.value("split", true));
  }
  if (type == "Digits") {
    return std::make_unique<SplitPreTokenizer>(
        TextPattern::regex("\\p{N}"),
        j.value("individual_digits", false) ? Behavior::Isolated : Behavior::Contiguous, false);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<SplitPreTokenizer>(TextPattern::regex("\\s+"), Behavior::Removed,
                                               false);
  }
  if (type == "Whitespace") {
    return std::make_unique<SplitPreTokenizer>(TextPattern::regex("\\w+|[^\\w\\s]+"),
                                               Behavior::Removed, true);
  }
  fail<ConfigError>("{}: pre_tokenizer type '{}' is not supported", source, type);
}

}  // namespace mtp::io
