// Tokenizer interface shared by every tokenizer format.
//
// BOS/EOS rules (docs/SEMANTICS.md): BOS from the tokenizer.json post-processor
// template, else add_bos_token in tokenizer_config.json, else the family
// default (llama2.c: BOS 1). Special-token text in the input is always
// recognised; add_special=false (--no-special) only suppresses the added BOS/EOS.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/utf8.h"

namespace mtp::io {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Throws InputError on invalid UTF-8 input.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special = true) const = 0;

  // Raw bytes one token contributes when it follows `prev` (-1 = none): byte
  // tokens give their byte, byte-level BPE symbols map back to bytes, '▁' becomes
  // ' ', and the SentencePiece leading space after BOS is dropped. The bytes of a
  // sequence may split UTF-8 characters across tokens; TextStream reassembles.
  // An id with no piece (outside [0, vocab_size()), or a gap in the
  // tokenizer's ids) gives kNoPiece, U+FFFD — never another token's text.
  virtual std::string token_bytes(int32_t id, int32_t prev) const = 0;

  // Full decode of a sequence (concatenated token_bytes, invalid UTF-8 -> U+FFFD).
  std::string decode(std::span<const int32_t> ids) const;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;          // -1 if none
  virtual bool adds_bos() const = 0;           // encode(add_special=true) prepends BOS
  virtual std::vector<int32_t> eos_ids() const = 0;  // tokenizer's own EOS (may be empty)
  virtual std::string kind() const = 0;        // "llama2c", "sentencepiece", "hf-bpe", ...
};

// What token_bytes gives for an id without a piece: U+FFFD.
inline constexpr std::string_view kNoPiece = "\xEF\xBF\xBD";

// The tokenizer must cover the model's vocabulary: one with more tokens than
// the model (its ids would index past the embedding) or covering less than
// 90 % of it (the wrong tokenizer for this model) is a ConfigError naming
// `tokenizer_path` and both sizes. A smaller gap (Qwen pads 151,665 tokens to
// a 151,936-row embedding) is allowed; the ids without a piece decode as
// U+FFFD, and one warning line goes to `warn` (nullptr: none).
void check_tokenizer_covers(int64_t model_vocab, const Tokenizer& tok,
                            const std::string& tokenizer_path, std::FILE* warn = stderr);

// The most bytes of text a prompt of fewer than `ctx` tokens can hold with
// `tok`: 4 x ctx x its longest token's bytes (a normalizer may shrink text,
// NFKC by up to 3x). A longer prompt cannot fit the context, so it is refused
// before it is read whole or tokenized (a 50 MB prompt for a 512-token
// context took 35 s and 1.3 GB to refuse).
size_t max_prompt_bytes(const Tokenizer& tok, int64_t ctx);
// InputError when `bytes` (the size of the prompt `what`) is over that bound.
void check_prompt_bytes(size_t bytes, size_t max_bytes, int64_t ctx, const std::string& what);

// Opens a tokenizer by path: a directory (tokenizer.json, else tokenizer.model,
// else tokenizer.bin / tok*.bin), tokenizer.json, a SentencePiece .model, a
// llama2.c tokenizer .bin, GPT-2 encoder.json (vocab.bpe beside it), or a GGUF
// file (recognised by its magic; its tokenizer.ggml.* metadata, tokenizer_gguf.h).
// tokenizer_config.json beside the file is read when present.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace mtp::io
