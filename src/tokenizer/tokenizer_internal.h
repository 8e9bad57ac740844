// Helpers shared by the tokenizer implementations (not part of the public API).
//
// Every tokenizer keeps the same BOS/EOS contract (tokenizer.h, docs/SEMANTICS.md):
// the format's own BOS rule wins, tokenizer_config.json beside the file refines
// it, and special-token text in the input is always recognised.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mtp::io::detail {

// Hash map keyed by std::string that can be probed with a string_view
// (heterogeneous lookup), so hot loops do not allocate keys.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// Length of the UTF-8 sequence starting at s[i] when it is complete and valid,
// else 0. Used to walk text that encode() has already validated.
size_t utf8_len_at(std::string_view s, size_t i);

// Decodes the code point at s[i] (s must be valid there) and advances i.
uint32_t next_codepoint(std::string_view s, size_t& i);

// Appends the UTF-8 encoding of cp.
void append_utf8(std::string& out, uint32_t cp);

// Throws InputError naming the byte offset of the first invalid sequence.
void require_valid_utf8(std::string_view text);

// "<0xNN>" -> NN, else -1 (SentencePiece byte pieces).
int parse_byte_piece(std::string_view piece);

// What we use from tokenizer_config.json. Tokens may be written either as a
// plain string or as {"content": "..."} (AddedToken form); both are accepted.
struct TokenizerConfig {
  bool present = false;
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
};

// tokenizer_config.json that belongs to `file`: "<prefix>tokenizer_config.json"
// when the file is named "<prefix>tokenizer.json" / "<prefix>tokenizer.model"
// (so shared/tokenizers/llama2.tokenizer.json pairs with
// llama2.tokenizer_config.json), else tokenizer_config.json in the same folder.
// Returns "" when neither exists.
std::string config_path_for(const std::string& file);

// Reads and parses the config; an empty path gives a config with present=false.
// Throws FormatError when the file exists but is not valid JSON.
TokenizerConfig read_tokenizer_config(const std::string& path);

}  // namespace mtp::io::detail
