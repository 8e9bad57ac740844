// Text stages of a Hugging Face tokenizer pipeline, before the BPE model:
// added-token matching, normalizers and pre-tokenizers, built from the
// tokenizer.json "normalizer" / "pre_tokenizer" objects.
//
// Contracts (semantics follow the Rust `tokenizers` library):
// - Added tokens are matched leftmost-longest on the raw text; they are never
//   normalized or split further.
// - Regex patterns are the Oniguruma patterns HF stores, run with PCRE2 under
//   bounded work (io/tokenizer_regex.h: the escapes rewritten, the limits,
//   an InputError naming the pattern when a search exceeds them).
// - Unsupported component types throw ConfigError naming the type, rather than
//   silently tokenizing differently from the reference.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mtp::io {

class AddedTokenMatcher {
 public:
  struct Token {
    std::string content;
    int32_t id;
    bool lstrip = false;       // the match also swallows whitespace on its left
    bool rstrip = false;       // ... and on its right
    bool single_word = false;  // only matches when not inside a word
  };
  struct Match {
    size_t begin, end;  // byte range in the text, including stripped whitespace
    int32_t id;
  };

  explicit AddedTokenMatcher(std::vector<Token> tokens);
  // Non-overlapping matches, left to right; at each position the longest token.
  std::vector<Match> find_all(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

  // Splits `text` at the matches: plain(run, at_start) encodes each run of text
  // between matches (the last one too, possibly empty; at_start: the run begins
  // the text), and each match appends its id to `out`, in text order.
  template <class Plain>
  void encode_around(std::string_view text, std::vector<int32_t>& out, Plain&& plain) const {
    size_t pos = 0;
    for (const Match& m : find_all(text)) {
      plain(text.substr(pos, m.begin - pos), pos == 0);
      out.push_back(m.id);
      pos = m.end;
    }
    plain(text.substr(pos), pos == 0);
  }

 private:
  std::vector<Token> tokens_;
  std::vector<int32_t> terminal_;                // trie node -> token index or -1
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  std::array<bool, 256> starts_{};               // bytes that begin some token
};

// A "pattern" of the HF JSON: {"String": literal} or {"Regex": oniguruma}.
class TextPattern {
 public:
  static TextPattern literal(std::string s);
  static TextPattern regex(const std::string& pattern);  // throws ConfigError (tokenizer_regex.h)
  static TextPattern from_json(const nlohmann::json& j, const std::string& source);
  ~TextPattern();
  TextPattern(TextPattern&&) noexcept;
  TextPattern& operator=(TextPattern&&) noexcept;

  // Byte ranges of the non-empty matches, in order, non-overlapping.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  TextPattern() = default;
  struct Regex;
  std::string literal_;
  std::unique_ptr<Regex> re_;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string apply(std::string_view text) const = 0;
};
// nullptr for a JSON null (no normalizer).
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& source);

// A pre-tokenized piece. `first` marks the piece that starts at offset 0 of
// the input (Metaspace's prepend_scheme "first" only prefixes that one).
struct Piece {
  std::string text;
  bool first;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void apply(std::vector<Piece>& pieces) const = 0;
  // True when a ByteLevel step is present: the model vocabulary is then
  // written in the byte-level alphabet.
  virtual bool byte_level() const { return false; }
};
// nullptr for a JSON null (no pre-tokenizer).
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j,
                                                 const std::string& source);
// The ByteLevel pre-tokenizer (GPT-2 regex when use_regex).
std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex);

}  // namespace mtp::io
