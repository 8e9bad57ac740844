// Shared tokenizer fixtures for the io tests: each big tokenizer is loaded at
// most once per test binary (the Gemma 3 tokenizer.json alone is 33 MB).
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mtp::test {

// Loads ../shared/<rel> through load_tokenizer() on first use and keeps it for
// the life of the process; nullptr when the shared file is absent.
const io::Tokenizer* shared_tokenizer(const std::string& rel);

// The tokenizers every round-trip test covers (paths relative to ../shared).
const std::vector<std::string>& all_tokenizer_paths();

// First `max_bytes` of a shared corpus, cut back to a UTF-8 character
// boundary; "" when absent.
std::string corpus_sample(const std::string& rel, size_t max_bytes);

// llama.cpp tokenizer test vectors: the .inp strings (each followed by
// "\n__ggml_vocab_test__\n", or separated by it in newer files, as llama.cpp's
// convert script writes them) and the .out ids, one line per string.
struct Vectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> ids;
};
Vectors read_vectors(const std::string& inp_path, const std::string& out_path);

// Encodes every vector of ggml-vocab-<name> without special tokens and expects
// the reference ids; skips when the shared vectors are absent.
void check_vectors(const io::Tokenizer& tok, const std::string& name);

}  // namespace mtp::test

// Skips the test when the shared tokenizer is absent.
#define MTP_REQUIRE_TOKENIZER(var, rel)                                 \
  const ::mtp::io::Tokenizer* var = ::mtp::test::shared_tokenizer(rel); \
  if (!var)                                                             \
  GTEST_SKIP() << "shared data not found: ../shared/" << (rel)          \
               << " (tests read it from the shared folder)"
