// Tokenizers from GGUF tokenizer.ggml.* metadata (io/tokenizer_gguf.h),
// against llama.cpp's reference vectors in ../shared/tokenizer-tests:
// - llama-spm: the vocab-only GGUF file llama.cpp ships, read as it is;
// - gpt-2 and llama-bpe: GGUF files written here (io::write_gguf) from the
//   shared GPT-2 files and Llama 3 tokenizer.json the way llama.cpp's
//   converter stores them (tokens in id order in GPT-2's byte alphabet,
//   token types, "a b" merges, the pre-tokenizer name).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"
#include "io/tokenizer_fixture.h"
#include "tokenizer/tokenizer_gguf.h"
#include "test_util.h"

namespace mtp::test {
namespace {

using io::GgufMetadata;
using io::GgufValue;

TEST(GgufTokenizer, LlamaSpmFileMatchesReferenceVectors) {
  MTP_REQUIRE_SHARED(path, "tokenizer-tests/ggml-vocab-llama-spm.gguf");
  const auto tok = io::load_tokenizer(path);  // the factory recognises the magic
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{2}));
  check_vectors(*tok, "llama-spm");
  // Same ids and text as the Llama 2 .model the vectors were made with.
  MTP_REQUIRE_TOKENIZER(model, "tokenizers/llama2.tokenizer.model");
  const std::string text = corpus_sample("corpora/gutenberg-en-16MB.txt", 64 * 1024) +
                           corpus_sample("corpora/aozora-ja-8MB.txt", 16 * 1024);
  if (text.empty()) GTEST_SKIP() << "shared corpora not found";
  const auto ids = tok->encode(text);
  EXPECT_TRUE(ids == model->encode(text));
  EXPECT_EQ(tok->decode(ids), model->decode(ids));
  EXPECT_EQ(tok->decode(ids), text);
}

GgufMetadata bpe_metadata(const std::vector<std::string>& tokens, const std::vector<int32_t>& types,
                          const std::vector<std::string>& merges, const std::string& pre) {
  GgufMetadata kv;
  kv.push_back({"general.architecture", GgufValue::str("llama")});
  kv.push_back({"tokenizer.ggml.model", GgufValue::str("gpt2")});
  kv.push_back({"tokenizer.ggml.pre", GgufValue::str(pre)});
  kv.push_back({"tokenizer.ggml.tokens", GgufValue::strings(tokens)});
  kv.push_back({"tokenizer.ggml.token_type", GgufValue::i32s(types)});
  kv.push_back({"tokenizer.ggml.merges", GgufValue::strings(merges)});
  return kv;
}

std::string write_tmp(const std::string& tag, const GgufMetadata& kv) {
  const std::string p = temp_dir("gguf-tok") + "/" + tag + ".gguf";
  io::write_gguf(p, kv, {});
  return p;
}

TEST(GgufTokenizer, Gpt2FromEncoderJsonMatchesReferenceVectors) {
  MTP_REQUIRE_SHARED(enc, "tokenizers/gpt2.encoder.json");
  MTP_REQUIRE_SHARED(bpe, "tokenizers/gpt2.vocab.bpe");
  const auto j = nlohmann::json::parse(read_file(enc));
  std::vector<std::string> tokens(j.size());
  std::vector<int32_t> types(j.size(), 1);
  for (auto it = j.begin(); it != j.end(); ++it) tokens.at(it.value().get<size_t>()) = it.key();
  const int32_t eot = j.at("<|endoftext|>").get<int32_t>();
  types[size_t(eot)] = 3;  // control
  std::vector<std::string> merges;
  const std::string text = read_file(bpe);
  for (size_t pos = text.find('\n') + 1; pos < text.size();) {  // skip "#version"
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (eol > pos) merges.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  GgufMetadata kv = bpe_metadata(tokens, types, merges, "gpt-2");
  kv.push_back({"tokenizer.ggml.bos_token_id", GgufValue::u32(uint32_t(eot))});
  kv.push_back({"tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(eot))});
  const std::string p = write_tmp("gpt2", kv);
  const auto tok = io::load_tokenizer(p);
  EXPECT_FALSE(tok->adds_bos());
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{eot}));
  check_vectors(*tok, "gpt-2");
  const std::string sample = "Hello world, \xC3\xA9t\xC3\xA9\n\n 123";
  EXPECT_EQ(tok->decode(tok->encode(sample)), sample);
  EXPECT_EQ(tok->encode("a<|endoftext|>").back(), eot);  // control text is one token
}

// A GGUF whose tensors mtpspec cannot read (here one IQ2_XS tensor) still
// gives its tokenizer — the vocabulary is metadata — while loading it as a
// model is refused naming the tensor and the type.
TEST(GgufTokenizer, ReadFromAFileWithTensorsOfAnUnsupportedType) {
  const std::vector<std::string> tokens = {"a", "b", "c", "\xC4\xA0", "ab", "abc"};
  const GgufMetadata kv = bpe_metadata(tokens, std::vector<int32_t>(tokens.size(), 1),
                                       {"a b", "ab c"}, "gpt-2");
  const std::string dir = temp_dir("gguf-tok-iq");
  io::write_gguf(dir + "/plain.gguf", kv, {});
  // ggml type 17 (IQ2_XS) is unknown to the writer: its bytes are written as given.
  io::write_gguf(dir + "/iq.gguf", kv, {{"blk.0.attn_q.weight", {256, 2}, 17, std::string(148, '\1')}});
  const auto plain = io::load_tokenizer(dir + "/plain.gguf");
  const auto iq = io::load_tokenizer(dir + "/iq.gguf");
  EXPECT_EQ(iq->vocab_size(), int(tokens.size()));
  EXPECT_EQ(iq->encode("abc ab"), plain->encode("abc ab"));
  EXPECT_EQ(iq->encode("abc ab"), (std::vector<int32_t>{5, 3, 4}));
  expect_error<FormatError>([&] { io::GgufFile f(dir + "/iq.gguf"); },
                            {"blk.0.attn_q.weight", "IQ2_XS", "does not support"});
}

TEST(GgufTokenizer, Llama3FromTokenizerJsonMatchesReferenceVectors) {
  MTP_REQUIRE_SHARED(path, "tokenizers/llama3.tokenizer.json");
  const auto j = nlohmann::json::parse(read_file(path));
  const auto& vocab = j.at("model").at("vocab");
  size_t n = vocab.size();
  for (auto& a : j.at("added_tokens")) n = std::max(n, a.at("id").get<size_t>() + 1);
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, 1);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) tokens.at(it.value().get<size_t>()) = it.key();
  for (auto& a : j.at("added_tokens")) {
    tokens.at(a.at("id").get<size_t>()) = a.at("content").get<std::string>();
    types.at(a.at("id").get<size_t>()) = 3;
  }
  std::vector<std::string> merges;
  for (auto& m : j.at("model").at("merges")) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  GgufMetadata kv = bpe_metadata(tokens, types, merges, "llama-bpe");
  kv.push_back({"tokenizer.ggml.bos_token_id", GgufValue::u32(128000)});
  kv.push_back({"tokenizer.ggml.eos_token_id", GgufValue::u32(128001)});
  kv.push_back({"tokenizer.ggml.eot_token_id", GgufValue::u32(128009)});
  kv.push_back({"tokenizer.ggml.eom_token_id", GgufValue::u32(128008)});
  const auto tok = io::load_tokenizer(write_tmp("llama3", kv));
  check_vectors(*tok, "llama-bpe");
  EXPECT_TRUE(tok->adds_bos());  // llama.cpp's default for the llama3 pre-tokenizer
  EXPECT_EQ(tok->encode("hi").front(), 128000);
  // EOS, EOT and EOM all end generation.
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{128001, 128009, 128008}));
  MTP_REQUIRE_TOKENIZER(ref, "tokenizers/llama3.tokenizer.json");
  const std::string text = corpus_sample("corpora/gutenberg-en-16MB.txt", 32 * 1024);
  if (!text.empty()) {
    EXPECT_TRUE(tok->encode(text, false) == ref->encode(text, false));
    EXPECT_EQ(tok->decode(tok->encode(text, false)), text);
  }
  // add_bos_token=false switches the BOS off.
  kv.push_back({"tokenizer.ggml.add_bos_token", GgufValue::boolean(false)});
  EXPECT_FALSE(io::load_tokenizer(write_tmp("llama3-nobos", kv))->adds_bos());
}

TEST(GgufTokenizer, UnsupportedOrMissingPiecesAreRefusedClearly) {
  const std::vector<std::string> toks = {"a", "b", "ab"};
  GgufMetadata kv = bpe_metadata(toks, {1, 1, 1}, {"a b"}, "deepseek-coder");
  expect_error<ConfigError>([&] { io::load_tokenizer(write_tmp("pre", kv)); },
                            {"tokenizer.ggml.pre", "deepseek-coder", "not supported"});
  GgufMetadata t5 = {{"tokenizer.ggml.model", GgufValue::str("t5")}};
  expect_error<ConfigError>([&] { io::load_tokenizer(write_tmp("t5", t5)); },
                            {"tokenizer.ggml.model", "t5"});
  expect_error<FormatError>([&] { io::load_tokenizer(write_tmp("none", {})); },
                            {"no tokenizer", "give a tokenizer file"});
  GgufMetadata bad = bpe_metadata(toks, {1, 1, 1}, {"a b"}, "gpt-2");
  bad.push_back({"tokenizer.ggml.eos_token_id", GgufValue::u32(7)});
  expect_error<FormatError>([&] { io::load_tokenizer(write_tmp("eos", bad)); },
                            {"eos_token_id", "7", "outside"});
  GgufMetadata types = bpe_metadata(toks, {1, 1}, {"a b"}, "gpt-2");
  expect_error<FormatError>([&] { io::load_tokenizer(write_tmp("types", types)); },
                            {"token_type", "2 entries", "3 tokens"});
}

}  // namespace
}  // namespace mtp::test
