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
#include "gguf_util.h"
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
                            {"tokenizer.ggml.pre", "deepseek-coder", "not supported", "smollm"});
  GgufMetadata t5 = {{"tokenizer.ggml.model", GgufValue::str("t5")}};
  expect_error<ConfigError>([&] { io::load_tokenizer(write_tmp("t5", t5)); },
                            {"tokenizer.ggml.model", "t5"});
  expect_error<FormatError>([&] { io::load_tokenizer(write_tmp("none", {})); },
                            {"no tokenizer", "give a tokenizer file"});
  GgufMetadata types = bpe_metadata(toks, {1, 1}, {"a b"}, "gpt-2");
  expect_error<FormatError>([&] { io::load_tokenizer(write_tmp("types", types)); },
                            {"token_type", "2 entries", "3 tokens"});
}

// llama.cpp's rules for special ids (llama-vocab.cpp load()): each tokenizer
// model has defaults ("llama": BOS 1, EOS 2, unknown 0; "gpt2": BOS = EOS =
// 11); a key inside the vocabulary replaces the default, one outside it keeps
// the default with a warning, and a default outside the vocabulary is no id.
TEST(GgufTokenizer, SpecialIdsFollowLlamaCppDefaults) {
  GgufMetadata spm;
  add_test_vocab(spm, 300);
  std::erase_if(spm, [](const auto& kv) { return kv.first.find("_token_id") != std::string::npos; });
  const auto s = io::load_tokenizer(write_tmp("spm-defaults", spm));
  EXPECT_EQ(s->bos_id(), 1);
  EXPECT_EQ(s->eos_ids(), (std::vector<int32_t>{2}));
  EXPECT_TRUE(s->adds_bos());

  std::vector<std::string> toks = {"a", "b", "ab"};
  GgufMetadata small = bpe_metadata(toks, {1, 1, 1}, {"a b"}, "gpt-2");
  const auto b = io::load_tokenizer(write_tmp("bpe-small", small));
  EXPECT_EQ(b->bos_id(), -1);  // default 11 is outside 3 tokens
  EXPECT_TRUE(b->eos_ids().empty());
  small.push_back({"tokenizer.ggml.eos_token_id", GgufValue::u32(7)});
  small.push_back({"tokenizer.ggml.bos_token_id", GgufValue::u32(2)});
  testing::internal::CaptureStderr();
  const auto bad = io::load_tokenizer(write_tmp("bpe-bad-eos", small));
  const std::string warn = testing::internal::GetCapturedStderr();
  EXPECT_NE(warn.find("eos_token_id = 7 is outside"), std::string::npos) << warn;
  EXPECT_TRUE(bad->eos_ids().empty());
  EXPECT_EQ(bad->bos_id(), 2);
  EXPECT_FALSE(bad->adds_bos());  // "gpt-2": BOS only when add_bos_token says so

  for (int i = 0; i < 12; ++i) toks.push_back("t" + std::to_string(i));
  const auto big = io::load_tokenizer(
      write_tmp("bpe-big", bpe_metadata(toks, std::vector<int32_t>(toks.size(), 1), {"a b"}, "gpt-2")));
  EXPECT_EQ(big->bos_id(), 11);
  EXPECT_EQ(big->eos_ids(), (std::vector<int32_t>{11}));
  EXPECT_EQ(big->decode(std::vector<int32_t>{11}), "t8");  // a normal-typed BOS keeps its text
}

// A Llama-2-style vocabulary as llama.cpp's converter writes it from a
// checkpoint whose tokenizer_config marks <unk> special: <unk> typed
// CONTROL, no unknown_token_id. It loads; text without a piece falls back to
// byte pieces; "<unk>" in the text is token 0.
TEST(GgufTokenizer, SpmWithoutAnUnknownTypedPieceLoads) {
  GgufMetadata kv;
  add_test_vocab(kv, 300);
  for (auto& [k, v] : kv) {
    if (k == "tokenizer.ggml.token_type") v.arr[0] = GgufValue::i32(3);
  }
  std::erase_if(kv, [](const auto& e) { return e.first == "tokenizer.ggml.unknown_token_id"; });
  const auto tok = io::load_tokenizer(write_tmp("spm-unk-control", kv));
  const auto ids = tok->encode("a\xE2\x82\xAC<unk>", false);  // "a€<unk>"
  EXPECT_EQ(ids, (std::vector<int32_t>{259, 3 + 0xE2, 3 + 0x82, 3 + 0xAC, 0}));
  EXPECT_EQ(tok->decode(ids), "a\xE2\x82\xAC");
  // An unknown_token_id outside the vocabulary keeps the default 0; without
  // byte pieces, text that is no piece becomes that id.
  GgufMetadata tiny = {{"tokenizer.ggml.model", GgufValue::str("llama")},
                       {"tokenizer.ggml.tokens", GgufValue::strings({"<s>", "</s>", "\xE2\x96\x81" "a"})},
                       {"tokenizer.ggml.token_type", GgufValue::i32s({3, 3, 1})},
                       {"tokenizer.ggml.bos_token_id", GgufValue::u32(0)},
                       {"tokenizer.ggml.eos_token_id", GgufValue::u32(1)},
                       {"tokenizer.ggml.unknown_token_id", GgufValue::u32(9)}};
  testing::internal::CaptureStderr();
  const auto t = io::load_tokenizer(write_tmp("spm-tiny", tiny));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("unknown_token_id = 9"), std::string::npos);
  EXPECT_EQ(t->encode("a", false), (std::vector<int32_t>{2}));
  const auto unk = t->encode("b", false);
  EXPECT_FALSE(unk.empty());
  EXPECT_TRUE(std::all_of(unk.begin(), unk.end(), [](int32_t id) { return id == 0; }));
}

// User-defined tokens of a GGUF vocabulary are matched in the raw text, as
// llama.cpp does (Gemma 3 stores runs of spaces and newlines that way).
TEST(GgufTokenizer, SpmUserDefinedTokensMatchTheRawText) {
  GgufMetadata kv;
  add_test_vocab(kv, 300);
  for (auto& [k, v] : kv) {
    if (k == "tokenizer.ggml.tokens") v.arr[299] = GgufValue::str("  ");
    if (k == "tokenizer.ggml.token_type") v.arr[299] = GgufValue::i32(4);
  }
  kv.push_back({"tokenizer.ggml.add_space_prefix", GgufValue::boolean(false)});
  const auto tok = io::load_tokenizer(write_tmp("spm-user", kv));
  const auto ids = tok->encode("a  b", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 299);
  EXPECT_EQ(tok->decode(ids), "a  b");
}

// tokenizer.ggml.pre names map to llama.cpp's pre-tokenizer types: "smollm"
// (SmolLM2) isolates each digit before GPT-2's regex; a missing name is
// llama.cpp's "default" (with a warning); tokens named like llama.cpp's
// end-of-generation list end generation.
TEST(GgufTokenizer, PreTokenizerNamesAndEndOfGenerationTexts) {
  std::vector<std::string> toks = {"1", "2", "12", "\xC4\xA0", "x", "<|im_end|>", "<|endoftext|>"};
  std::vector<int32_t> types = {1, 1, 1, 1, 1, 3, 3};
  GgufMetadata kv = bpe_metadata(toks, types, {"1 2"}, "smollm");
  kv.push_back({"tokenizer.ggml.eos_token_id", GgufValue::u32(5)});
  const auto smol = io::load_tokenizer(write_tmp("smollm", kv));
  EXPECT_EQ(smol->encode("12", false), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(smol->eos_ids(), (std::vector<int32_t>{5, 6}));
  const auto gpt2 = io::load_tokenizer(write_tmp("gpt2-digits", bpe_metadata(toks, types, {"1 2"}, "gpt-2")));
  EXPECT_EQ(gpt2->encode("12", false), (std::vector<int32_t>{2}));
  std::erase_if(kv, [](const auto& e) { return e.first == "tokenizer.ggml.pre"; });
  testing::internal::CaptureStderr();
  const auto dflt = io::load_tokenizer(write_tmp("no-pre", kv));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("'default'"), std::string::npos);
  EXPECT_EQ(dflt->encode("12 x", false), (std::vector<int32_t>{2, 3, 4}));
}

}  // namespace
}  // namespace mtp::test
