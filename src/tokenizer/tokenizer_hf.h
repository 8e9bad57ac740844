// Hugging Face tokenizer.json (BPE models) and the GPT-2 encoder.json +
// vocab.bpe pair, which is the same byte-level BPE without the JSON wrapper.
//
// Pipeline of encode(), following the Rust `tokenizers` library:
//   1. added tokens (special or not) are cut out of the raw text,
//      leftmost-longest, whatever add_special says;
//   2. each remaining segment is normalized (Sequence/Prepend/Replace/NFC...),
//      then pre-tokenized (Split regex, ByteLevel, Metaspace, Sequence);
//   3. each piece goes through the BPE model (tokenizer_bpe.h);
//   4. with add_special, the post-processor's ids are put around the result.
//
// BOS (docs/SEMANTICS.md): the SpecialToken before $A in a TemplateProcessing
// "single" template; else tokenizer_config.json add_bos_token + bos_token;
// else none is added (bos_id() still names bos_token when the config has one).
// EOS ids: tokenizer_config.json eos_token. A config file beside the JSON is
// found by tokenizer_internal.h config_path_for().
//
// Decoding (token_bytes): byte-level tokens give their bytes; otherwise the
// decoder's Replace/Metaspace turn '▁' into ' ', ByteFallback turns <0xNN>
// into the byte, and a Strip (or Metaspace prepend) decoder drops the leading
// space of the first token (prev = -1 or BOS). BOS itself gives ""; other
// added tokens give their content.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_text.h"

namespace mtp::io {

class HfTokenizer final : public Tokenizer {
 public:
  struct AddedToken {
    std::string content;
    int32_t id;
    bool special = false;
    bool normalized = false;  // matched after normalization instead of on raw text
    bool lstrip = false, rstrip = false, single_word = false;
  };
  // Everything a loader extracts; the constructor derives the rest.
  struct Parts {
    std::string source;  // file name, for messages
    std::string kind;    // "hf-bpe" or "gpt2"
    std::unique_ptr<Normalizer> normalizer;
    std::unique_ptr<PreTokenizer> pre_tokenizer;
    std::unique_ptr<BpeModel> model;
    std::vector<std::string> model_tokens;  // id -> model-space string ("" where unused)
    std::vector<uint8_t> model_present;     // id -> 1 where the vocab names it (empty: all)
    std::vector<AddedToken> added;
    // Decoder.
    std::vector<std::pair<std::string, std::string>> replacements;  // literal from -> to
    bool decode_byte_fallback = false;
    bool strip_leading_space = false;
    // Post-processor / config.
    std::vector<int32_t> prefix, suffix;
    int32_t bos = -1;
    bool bos_decodes_empty = true;  // false: BOS gives its text (a GGUF's normal-typed BOS)
    std::vector<int32_t> eos;
  };

  explicit HfTokenizer(Parts parts);

  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const override;
  std::string token_bytes(int32_t id, int32_t prev) const override;

  int32_t vocab_size() const override { return int32_t(bytes_.size()); }
  int32_t bos_id() const override { return p_.bos; }
  bool adds_bos() const override { return !p_.prefix.empty(); }
  std::vector<int32_t> eos_ids() const override { return p_.eos; }
  std::string kind() const override { return p_.kind; }

  // Id of a token written as text (added-token content or model vocab), or -1.
  int32_t token_id(std::string_view text) const;

 private:
  using Cache = std::unordered_map<std::string, std::vector<int32_t>>;
  void encode_segment(std::string_view text, bool first, Cache& cache,
                      std::vector<int32_t>& out) const;
  void encode_normalized(std::string text, bool first, Cache& cache,
                         std::vector<int32_t>& out) const;

  Parts p_;
  std::unique_ptr<AddedTokenMatcher> raw_added_;         // normalized == false
  std::unique_ptr<AddedTokenMatcher> normalized_added_;  // normalized == true
  std::vector<std::string> bytes_;                       // id -> decoded bytes
};

// Token written as text -> id: added-token content first, then the model
// vocabulary (byte-level names in either alphabet). -1 when absent.
int32_t resolve_token(const HfTokenizer::Parts& p, std::string_view name);

// tokenizer.json (tokenizer_config.json beside it is read when present).
// Throws IoError (missing), FormatError (not valid JSON / malformed), or
// ConfigError (a model or component type we do not implement).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path);

// GPT-2 encoder.json + vocab.bpe. BOS = EOS = <|endoftext|>; no BOS is added.
std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& encoder_json,
                                               const std::string& vocab_bpe);

}  // namespace mtp::io
