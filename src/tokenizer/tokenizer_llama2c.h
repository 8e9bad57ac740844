// llama2.c tokenizer.bin: int32 max_token_length, then one record per token
// (float score, int32 byte length, bytes). The file does not store the vocab
// size; every record up to the end of the file is a token.
//
// Encoding reproduces llama2.c run.c encode() exactly: a " " dummy prefix when
// the text is non-empty, one token per UTF-8 character (byte fallback id =
// byte + 3 when the character is not in the vocab), then repeatedly merge the
// adjacent pair whose concatenation is the highest-scoring vocab entry (ties:
// leftmost). run.c does this in O(n^2); we use a heap with the same choice
// order, so results are identical and long inputs stay fast. BOS = 1, EOS = 2.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

namespace mtp::io {

class Llama2cTokenizer final : public Tokenizer {
 public:
  // Throws IoError (missing or truncated file) or FormatError (bad contents).
  explicit Llama2cTokenizer(const std::string& path);

  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const override;
  // Like run.c decode(): a piece's leading space is dropped right after BOS, and
  // "<0xNN>" pieces give their raw byte. BOS/EOS give "" (their pieces are
  // "\n<s>\n"-style markers, never text). Out-of-range ids give "".
  std::string token_bytes(int32_t id, int32_t prev) const override;

  int32_t vocab_size() const override { return int32_t(pieces_.size()); }
  int32_t bos_id() const override { return kBos; }
  bool adds_bos() const override { return true; }
  std::vector<int32_t> eos_ids() const override { return {kEos}; }
  std::string kind() const override { return "llama2c"; }

  const std::string& piece(int32_t id) const { return pieces_.at(size_t(id)); }
  float score(int32_t id) const { return scores_.at(size_t(id)); }

  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;

 private:
  int32_t lookup(std::string_view s) const;

  std::string path_;
  int32_t max_token_length_ = 0;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<std::string> bytes_;    // decoded bytes per id (byte pieces resolved)
  detail::StringMap<int32_t> index_;  // piece -> first id with it
};

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path);

}  // namespace mtp::io
