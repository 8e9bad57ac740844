// Tokenizer from a GGUF file's tokenizer.ggml.* metadata, loaded by
// llama.cpp's rules (llama-vocab.cpp, read not copied; docs/FORMATS.md
// "GGUF"), so that every vocabulary llama.cpp loads, we load, built on the
// existing engines:
//
// - tokenizer.ggml.model "llama": SentencePiece-style BPE over `tokens`,
//   `scores` (F32, or INT32) and `token_type` (1 normal, 2 unknown, 3
//   control, 4 user-defined, 5 unused, 6 byte; 0 and unknown values are
//   undefined, read as normal). Default ids: BOS 1, EOS 2, unknown 0 — the
//   unknown id need not be typed unknown (the converter types "<unk>"
//   CONTROL when tokenizer_config marks it special). add_space_prefix
//   (default true) is the dummy prefix, remove_extra_whitespaces (default
//   false); BOS added unless add_bos_token is false. Control, unknown and
//   user-defined token texts are matched in the raw input.
// - "gpt2": byte-level BPE over `tokens` (GPT-2's printable alphabet) and
//   `merges` ("a b" by rank); control, unknown and user-defined tokens are
//   added tokens, matched in the raw text. Default ids: BOS = EOS = 11.
//   tokenizer.ggml.pre selects llama.cpp's pre-tokenizer type (the table in
//   tokenizer_gguf.cc: llama3 names, gpt-2 names, starcoder/smollm names,
//   qwen2 names, qwen35, dbrx/smaug-bpe, "default" — also used, with a
//   warning, when the key is missing); its regexes run in order, each
//   isolating its matches, then the byte-level mapping (no normalizer, as
//   in llama.cpp). BOS is added by default for the llama3 names only.
//   Any other name is refused (ConfigError naming the supported ones)
//   rather than tokenized differently.
//
// Special ids: a key inside the vocabulary replaces the default; one outside
// keeps the default with a warning on stderr; a default outside the
// vocabulary is no id. Generation ends at EOS, EOT, EOM and at the tokens
// llama.cpp recognises by text (<|eot_id|>, <|im_end|>, <end_of_turn>,
// <|endoftext|>, ...). An empty token text reads as "[EMPTY_<id>]".
#pragma once
#include <memory>
#include <string>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace mtp::io {

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f);
// Opens the file (IoError / FormatError as GgufFile).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path);

}  // namespace mtp::io
