// SentencePiece .model tokenizer, read and run natively.
//
// Why native: a .model is a small protobuf (ModelProto) and its BPE is a few
// dozen lines, so we decode the wire format ourselves and implement
// sentencepiece's bpe_model.cc exactly (checked token for token against
// libsentencepiece on the shared corpora). This keeps tokenization free of
// libsentencepiece's bundled protobuf, which crashes any process that also
// loads the system libprotobuf (libtorch), and is faster on long inputs.
// Models the native reader does not implement fall back to libsentencepiece
// (tokenizer_sentencepiece_lib.cc).
//
// Contracts:
// - Supported: model_type BPE with the identity normalizer (Llama 2, Mistral,
//   Gemma and most LLM .model files): add_dummy_prefix, remove_extra_whitespaces,
//   escape_whitespaces, user-defined pieces, unused pieces, byte fallback.
//   Unigram models or a precompiled normalization charsmap throw ConfigError
//   here; load_sentencepiece_tokenizer() then uses libsentencepiece.
// - BOS is the control piece named by trainer_spec.bos_piece ("<s>") and is
//   added by default; tokenizer_config.json beside the model may switch it off
//   (add_bos_token: false) or add EOS (add_eos_token: true). EOS ids: the
//   eos_piece plus the config's eos_token when it names another piece.
// - Special-token text is always recognised: the text of control pieces and of
//   the unknown piece is split out of the input first, and each remaining
//   segment is encoded separately (each gets the dummy prefix, like Hugging
//   Face's legacy Llama tokenizer).
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_internal.h"

namespace mtp::io {

class AddedTokenMatcher;

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // SentencePiece piece types (sentencepiece_model.proto).
  enum class PieceType {
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6
  };

  // Throws IoError (missing or truncated file), FormatError (not a
  // SentencePiece model) or ConfigError (a model kind we do not implement).
  explicit SentencePieceTokenizer(const std::string& path);

  // A BPE model given as its parts instead of a .model file (GGUF's
  // tokenizer.ggml.* arrays, tokenizer_gguf.cc): the same engine and
  // contracts; byte fallback when there are byte pieces; no
  // tokenizer_config.json is read. `source` names it in messages.
  // `unk`: the unknown id when no piece is typed Unknown (-1: none; text
  // that is no piece and has no byte pieces is then an InputError).
  // `user_defined_in_raw_text`: user-defined pieces are matched in the raw
  // input like control pieces (llama.cpp's rule for GGUF vocabularies)
  // instead of in the normalized text (sentencepiece's).
  struct Spec {
    std::string source;
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::vector<PieceType> types;
    int32_t bos = -1, unk = -1;
    std::vector<int32_t> eos;
    bool add_bos = true, add_eos = false;
    bool add_dummy_prefix = true, remove_extra_whitespaces = false;
    bool user_defined_in_raw_text = false;
  };
  explicit SentencePieceTokenizer(Spec spec);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const override;
  // '▁' -> ' ', byte pieces give their byte, control pieces give "", the
  // unknown piece gives " ⁇ " (libsentencepiece's surface). The dummy-prefix
  // space of the first piece (prev = -1 or BOS) is dropped when the model adds
  // a dummy prefix.
  std::string token_bytes(int32_t id, int32_t prev) const override;

  int32_t vocab_size() const override { return int32_t(pieces_.size()); }
  int32_t bos_id() const override { return bos_; }
  bool adds_bos() const override { return add_bos_ && bos_ >= 0; }
  std::vector<int32_t> eos_ids() const override { return eos_; }
  std::string kind() const override { return "sentencepiece"; }

  const std::string& piece(int32_t id) const { return pieces_.at(size_t(id)).text; }
  float score(int32_t id) const { return pieces_.at(size_t(id)).score; }
  PieceType type(int32_t id) const { return pieces_.at(size_t(id)).type; }
  int32_t unk_id() const { return unk_; }

 private:
  struct Piece {
    std::string text;
    float score;
    PieceType type;
  };
  void parse(const std::string& data);
  // The lookup tables, from pieces_. `unk`: the unknown id when no piece is
  // typed Unknown (-1: none); nullopt: such a model is refused (.model files).
  void build(std::optional<int32_t> unk = std::nullopt);
  std::string normalize(std::string_view text) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  int32_t lookup(std::string_view piece) const;  // -1 when not a mergeable piece
  void build_pairs();
  static uint32_t rank_of(float score);

  std::string path_;
  std::vector<Piece> pieces_;
  detail::StringMap<int32_t> mergeable_;  // Normal, UserDefined and Unused pieces
  detail::StringMap<int32_t> reserved_;   // the other types (control, unknown, byte)
  PairTable pairs_;  // (left, right) piece ids -> (rank_of(score), merged piece)
  std::unique_ptr<AddedTokenMatcher> specials_;      // control + unknown text in raw input
  std::unique_ptr<AddedTokenMatcher> user_defined_;  // frozen symbols in normalized text
  std::vector<std::string> bytes_;                   // id -> decoded bytes
  std::array<int32_t, 256> byte_ids_{};
  int32_t unk_ = -1, bos_ = -1;
  std::vector<int32_t> eos_;
  bool bpe_ = false, byte_fallback_ = false;
  bool add_dummy_prefix_ = true, remove_extra_whitespaces_ = true, escape_whitespaces_ = true;
  bool add_bos_ = true, add_eos_ = false;
  bool user_defined_raw_ = false;
};

// The native tokenizer, or the libsentencepiece one for model kinds it does
// not implement.
std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const std::string& path);
// Always libsentencepiece (tokenizer_sentencepiece_lib.cc).
std::unique_ptr<Tokenizer> load_libsentencepiece_tokenizer(const std::string& path);

}  // namespace mtp::io
