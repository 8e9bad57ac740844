// Vocabulary-only GGUF files (llama.cpp ships such files) written by the
// `gguf` PyPI package from the shared tokenizers, stored the way llama.cpp's
// converter stores each family (tests/python/gguf_fixture.py), tokenize as
// the tokenizer they were written from:
// - Llama 2 (SentencePiece): "<unk>" typed CONTROL because tokenizer_config
//   marks it special, and no tokenizer.ggml.unknown_token_id — llama.cpp
//   loads it (unknown id: the "llama" model's default 0), so do we;
// - Llama 3 ("llama-bpe") and Qwen 3 ("qwen2"): byte-level BPE with added
//   tokens typed CONTROL, without BOS/EOS keys (the "gpt2" model's defaults).
// Skipped with a message when the test venv is absent.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "io/tokenizer_fixture.h"
#include "cli_util.h"
#include "test_util.h"
#include "venv_util.h"

namespace mtp::test {
namespace {

// Writes the vocabulary GGUF of `kind` ("spm" or "bpe:PRE") from `source`.
std::string write_vocab(const std::string& py, const std::string& kind, const std::string& source) {
  const std::string out = temp_dir("gguf-pkg") + "/vocab.gguf";
  std::string log;
  const int rc = run_python(py, shell_quote(std::string(MTPSPEC_SOURCE_DIR) +
                                            "/tests/python/gguf_fixture.py") +
                                    " vocab " + shell_quote(kind) + " " + shell_quote(source) +
                                    " " + shell_quote(out),
                            &log);
  EXPECT_EQ(rc, 0) << log;
  return out;
}

// "" when equal, else the first differing offset with a window of each.
std::string first_difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return "offset " + std::to_string(i) + ": '" + a.substr(i, 40) + "' vs '" + b.substr(i, 40) + "'";
}

std::string sample_text() {
  return corpus_sample("corpora/gutenberg-en-16MB.txt", 24 * 1024) +
         corpus_sample("corpora/aozora-ja-8MB.txt", 6 * 1024) +
         "\n\n  tabs\tand 12345 digits, 'quotes' and ALLCAPS\n";
}

TEST(GgufPackageVocab, Llama2WithUnkTypedControlAndNoUnknownId) {
  MTP_REQUIRE_VENV(py, "test", "scripts/install-test-venv.sh");
  MTP_REQUIRE_SHARED(model, "tokenizers/llama2.tokenizer.model");
  MTP_REQUIRE_TOKENIZER(ref, "tokenizers/llama2.tokenizer.model");
  const auto tok = io::load_tokenizer(write_vocab(py, "spm", model));
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{2}));
  const std::string text = sample_text();
  EXPECT_TRUE(tok->encode(text) == ref->encode(text));
  EXPECT_EQ(first_difference(tok->decode(tok->encode(text)), text), "");
  // "<unk>" in the input is the control token 0 (llama.cpp's special-text rule).
  EXPECT_EQ(tok->encode("a<unk>b", false), (std::vector<int32_t>{263, 0, 289}));
}

void expect_bpe_matches(const std::string& py, const std::string& rel, const std::string& pre) {
  const std::string src = shared_path(rel);
  const io::Tokenizer* ref = shared_tokenizer(rel);
  if (src.empty() || !ref) GTEST_SKIP() << "shared data not found: ../shared/" << rel;
  const auto tok = io::load_tokenizer(write_vocab(py, "bpe:" + pre, src));
  EXPECT_EQ(tok->kind(), "gguf-gpt2");
  EXPECT_GE(tok->vocab_size(), ref->vocab_size());
  const std::string text = sample_text();
  EXPECT_TRUE(tok->encode(text, false) == ref->encode(text, false)) << rel;
  EXPECT_EQ(first_difference(tok->decode(tok->encode(text, false)), text), "");
  // No bos_token_id key: the "gpt2" model's default BOS id 11.
  EXPECT_EQ(tok->bos_id(), 11);
}

TEST(GgufPackageVocab, Llama3ByteLevel) {
  MTP_REQUIRE_VENV(py, "test", "scripts/install-test-venv.sh");
  expect_bpe_matches(py, "tokenizers/llama3.tokenizer.json", "llama-bpe");
}

TEST(GgufPackageVocab, Qwen3ByteLevelWithChatTokens) {
  MTP_REQUIRE_VENV(py, "test", "scripts/install-test-venv.sh");
  expect_bpe_matches(py, "tokenizers/qwen3.tokenizer.json", "qwen2");
  MTP_REQUIRE_TOKENIZER(ref, "tokenizers/qwen3.tokenizer.json");
  const auto tok = io::load_tokenizer(
      write_vocab(py, "bpe:qwen2", shared_path("tokenizers/qwen3.tokenizer.json")));
  const std::string chat = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(tok->encode(chat, false), ref->encode(chat, false));
  // <|im_end|> and <|endoftext|> end generation (llama.cpp marks them by text).
  const auto eos = tok->eos_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), tok->encode("<|im_end|>", false).at(0)), eos.end());
}

}  // namespace
}  // namespace mtp::test
