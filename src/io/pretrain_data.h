// The tokenized corpus of `mtpspec pretrain`: MODEL_DIR/pretrain/tokens.safetensors.
//
// Written by the main binary (which has the tokenizers) and read by
// bin/mtpspec-train (which has libtorch and no tokenizers), so the format
// lives here, free of both.
//
// Each split is one token stream: its documents concatenated, each as
// [BOS] + text tokens + [EOS] (BOS/EOS when the tokenizer has them), and the
// offset of every document in the stream. Tensors:
//   train          I32 [N]   training stream
//   train_starts   I64 [D]   document offsets into `train` (ascending, first 0)
//   heldout        I32 [M]   held-out stream (may be empty)
//   heldout_starts I64 [E]
// __metadata__: format = mtpspec-pretrain-tokens, format_version = 1, info =
// JSON: identity (corpus files and hashes, held-out fraction, tokenizer), its
// SHA-256 identity_hash, vocab, bos_id, eos_id (-1 = none), counts.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace mtp::io {

inline constexpr const char* kPretrainTokensFormat = "mtpspec-pretrain-tokens";

struct TokenStream {
  std::vector<int32_t> tokens;
  std::vector<int64_t> starts;  // one per document
  // Appends one document: [bos] + ids + [eos] (bos/eos < 0: none).
  void add_document(const std::vector<int32_t>& ids, int32_t bos, int32_t eos);
};

struct PretrainData {
  TokenStream train, heldout;
  nlohmann::json info;  // see above; vocab, bos_id and eos_id are required
};

// MODEL_DIR/pretrain (scratch of a pretraining run) and the tokens file in it.
std::string pretrain_dir(const std::string& model_dir);
std::string pretrain_tokens_path(const std::string& model_dir);

// Documents are held out by a hash of their text (FNV-1a 64 % 10^6 < fraction·10^6),
// so the split does not depend on their order or on the other documents.
bool is_heldout_document(std::string_view text, double fraction);

// Atomic (temp + rename). ShapeError when a stream's offsets are inconsistent.
void write_pretrain_data(const std::string& path, const PretrainData& d);
// IoError when missing; FormatError when it is not such a file or is inconsistent
// (offsets out of order, tokens outside [0, vocab)).
PretrainData read_pretrain_data(const std::string& path);
// Only the info (no token validation); empty JSON when the file is missing or
// not a pretraining tokens file.
nlohmann::json read_pretrain_info(const std::string& path);

}  // namespace mtp::io
