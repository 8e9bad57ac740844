// Tokenizer from a GGUF file's tokenizer.ggml.* metadata (llama.cpp's
// convention, docs/FORMATS.md "GGUF"), built on the existing engines:
//
// - tokenizer.ggml.model "llama": SentencePiece-style BPE over `tokens`,
//   `scores` and `token_type` (1 normal, 2 unknown, 3 control, 4
//   user-defined, 5 unused, 6 byte — sentencepiece's piece types; 0 =
//   undefined is read as normal). add_space_prefix (default true) is the
//   dummy prefix, remove_extra_whitespaces (default false); BOS added unless
//   add_bos_token is false.
// - "gpt2": byte-level BPE over `tokens` (GPT-2's printable alphabet) and
//   `merges` ("a b" by rank); control and user-defined tokens are added
//   tokens, matched in the raw text. The pre-tokenizer comes from
//   tokenizer.ggml.pre, mapped to the Hugging Face pipeline that name stands
//   for: "gpt-2" (GPT-2's ByteLevel regex), "llama3"/"llama-v3"/"llama-bpe"
//   (Llama 3's Split regex, ignore_merges), "qwen2"/"deepseek-r1-qwen"
//   (Qwen2's Split regex after NFC). Any other name is refused (ConfigError)
//   rather than tokenized differently. BOS is added for the llama3 names
//   (llama.cpp's default) unless add_bos_token says otherwise.
//
// IDs: bos_token_id, eos_token_id; eot_token_id and eom_token_id are EOS ids
// too (each ends generation). Ids outside the vocabulary are a FormatError.
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
