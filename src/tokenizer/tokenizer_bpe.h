// Rank-based BPE engine shared by Hugging Face tokenizer.json models (byte-level
// like GPT-2/Llama 3/Qwen, and SentencePiece-style like Llama 2/Gemma) and the
// GPT-2 encoder.json + vocab.bpe pair.
//
// Contracts:
// - Vocabulary strings are in "model space": raw bytes for byte-level models
//   (the GPT-2 printable-character alphabet is undone at load time, so a
//   token's bytes are its key), and the normalized text (with '▁') for
//   SentencePiece-style models.
// - encode_word() applies merges exactly like Hugging Face tokenizers' Word::
//   merge_all: repeatedly the lowest-rank adjacent pair, leftmost on ties. It
//   uses a priority queue over adjacent pairs and a linked list of symbols, so
//   a word of n symbols costs O(n log n) — SentencePiece-style models have no
//   pre-tokenizer and hand us whole paragraphs as one word.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_internal.h"

namespace mtp::io {

// GPT-2's reversible byte -> printable code point table (bytes_to_unicode).
const std::array<uint32_t, 256>& byte_to_unicode();
// Byte-level alphabet -> raw bytes; nullopt when a character is outside the table.
std::optional<std::string> byte_level_decode(std::string_view token);

// Open-addressing map (left id, right id) -> (rank, merged id). Looked up once
// per heap operation while merging, so it must be cheap and cache friendly.
class PairTable {
 public:
  struct Entry {
    uint64_t key;  // left id << 32 | right id
    int32_t rank, merged;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  void reserve(size_t n);
  void insert_or_assign(uint64_t key, int32_t rank, int32_t merged);
  const Entry* find(uint64_t key) const;
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static size_t hash(uint64_t k) { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20); }
  std::vector<Entry> slots_;
  size_t size_ = 0;
};

class BpeModel {
 public:
  struct Options {
    bool byte_level = false;     // initial symbols are single bytes
    bool byte_fallback = false;  // unknown characters become <0xNN> tokens
    bool ignore_merges = false;  // a word that is itself in the vocab is one token
    bool fuse_unk = false;       // consecutive unknowns collapse into one <unk>
    int32_t unk_id = -1;         // -1: unknown characters are dropped (as HF does)
  };
  using Merge = std::pair<std::string, std::string>;

  // Throws FormatError (naming `source`) when a merge names a token that is not
  // in the vocabulary or whose concatenation is not in it.
  BpeModel(Options opts, detail::StringMap<int32_t> vocab, const std::vector<Merge>& merges,
           const std::string& source);

  // Appends the ids of one pre-tokenized word (model space, valid UTF-8 for
  // non-byte-level models).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // Id of a model-space token, or -1.
  int32_t find(std::string_view token) const;
  const detail::StringMap<int32_t>& vocab() const { return vocab_; }
  const Options& options() const { return opts_; }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // linked list over the word; -1 ends it
  };
  void initial_symbols(std::string_view word, std::vector<Symbol>& syms) const;

  Options opts_;
  detail::StringMap<int32_t> vocab_;
  PairTable merges_;  // rank = merge position in the list
  std::array<int32_t, 256> byte_ids_{};  // byte-level: byte token; else <0xNN> token
};

}  // namespace mtp::io
