// Gemma 4's Hugging Face tokenizer.json layout (transformers' GemmaTokenizer,
// models/gemma/tokenization_gemma.py, which Gemma 4 checkpoints name): a BPE
// model with byte_fallback and fuse_unk over raw UTF-8 ("▁" for a space),
// merges as [a, b] pairs, normalizer Replace(" " -> "▁"), pre-tokenizer
// Split(" ", MergedWithPrevious) — a no-op after the normalizer —, decoder
// Replace("▁" -> " ") + ByteFallback + Fuse, a TemplateProcessing BOS, and
// the chat markers (<|turn>, <turn|>, <|tool_call>, <|"|>, ...) as special
// added tokens beside non-special ones (<mask>, <unused0>).
// A small vocabulary in exactly that layout is written at test time:
//   - default suite: the HF loader reads it and tokenizes every sample text
//     exactly as the GGUF "gemma4" loader (llama.cpp's layout: newline-run
//     pre-split, raw merges, token types) does from the same vocabulary;
//   - label `reference` (Transformers*): Hugging Face `tokenizers` itself,
//     from the reference venv, gives the same ids and decoded text;
//   - label `real` (Real*): the real 262,144-token Gemma 4 vocabulary
//     (llama.cpp's ggml-vocab-gemma-4.gguf: tokens, types and its 514,906
//     merges) written in this layout reproduces llama.cpp's reference
//     vectors (made with Hugging Face's tokenizer of the published
//     checkpoint) and decodes them back.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/gguf.h"
#include "io/tokenizer_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "venv_util.h"

namespace mtp::test {
namespace {

using nlohmann::json;

struct Vocab {
  std::vector<std::string> tokens;  // id -> text
  std::vector<int32_t> types;       // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user, 6 byte
  std::vector<bool> special;        // added token flagged special (HF)
  std::vector<std::pair<std::string, std::string>> merges;
};

// Gemma's id layout at small scale: specials first, the chat markers at their
// Gemma 4 ids (48, 49, 52, 105, 106), byte tokens, then characters and merges.
Vocab gemma4_vocab() {
  Vocab v;
  auto add = [&](const std::string& t, int32_t type, bool special = false) {
    v.tokens.push_back(t);
    v.types.push_back(type);
    v.special.push_back(special);
  };
  add("<pad>", 3, true), add("<eos>", 3, true), add("<bos>", 3, true), add("<unk>", 2, true);
  add("<mask>", 4), add("[multimodal]", 4);
  while (v.tokens.size() < 48) add("<unused" + std::to_string(v.tokens.size() - 6) + ">", 4);
  for (const char* t : {"<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
                        "<|\"|>", "<|channel>", "<channel|>", "<|think|>"})
    add(t, 3, true);
  while (v.tokens.size() < 105) add("<unused" + std::to_string(v.tokens.size() - 6) + ">", 4);
  add("<|turn>", 3, true), add("<turn|>", 3, true);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 6);
  }
  const std::string sp = "\u2581";  // SentencePiece's space
  for (const std::string c : {sp, std::string("\n"), std::string("\t")}) add(c, 1);
  for (const char* c : {"a", "b", "c", "d", "e", "f", "g", "h", "i", "k", "l", "m", "n", "o",
                        "p", "r", "s", "t", "u", "w", "y", "H", "T", "W", ",", ".", "!", ":",
                        "{", "}", "\u00e9", "\u65e5", "\u672c"})
    add(c, 1);
  // Merges in rank order; each result is a token. No merge joins a newline
  // to anything else (Gemma's vocabularies have no such token).
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"\n", "\n"},   {sp, sp},           {sp, "t"},           {"h", "e"},      {sp + "t", "he"},
      {"i", "n"},     {sp, "a"},          {"e", "r"},          {"o", "n"},      {sp, "i"},
      {sp + "i", "s"}, {"l", "l"},         {"e", "ll"},         {"H", "ell"},    {"Hell", "o"},
      {"o", "r"},     {sp, "w"},          {sp + "w", "or"},    {"l", "d"},      {sp + "wor", "ld"},
      {"\n\n", "\n\n"}, {"\t", "\t"},    {sp + sp, sp + sp},  {"\u65e5", "\u672c"},
      {"c", "a"},     {sp, "ca"},         {sp + "ca", "t"}};
  for (const auto& [a, b] : merges) {
    v.merges.emplace_back(a, b);
    add(a + b, 1);
  }
  return v;
}

// tokenizer.json + tokenizer_config.json in Gemma 4's layout; returns the JSON's path.
std::string write_hf(const Vocab& v, const std::string& dir) {
  json vocab = json::object(), added = json::array(), merges = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    vocab[v.tokens[i]] = i;
    if (v.types[i] == 2 || v.types[i] == 3 || v.types[i] == 4)
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                       {"special", bool(v.special[i])}});
  }
  for (const auto& [a, b] : v.merges) merges.push_back({a, b});
  const json tj = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}},
      {"pre_tokenizer",
       {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"},
        {"invert", false}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                  {{"SpecialToken", {{"id", "<bos>"}, {"type_id", 1}}}},
                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {2}}, {"tokens", {"<bos>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}}}}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
        {"fuse_unk", true}, {"byte_fallback", true}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}}};
  const std::string path = dir + "/tokenizer.json";
  std::ofstream(path) << tj.dump();
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<bos>"},
              {"eos_token", "<eos>"}, {"unk_token", "<unk>"}, {"pad_token", "<pad>"}}
             .dump();
  return path;
}

// The same vocabulary as llama.cpp's converter stores a Gemma 4 GGUF's.
std::string write_gguf(const Vocab& v, const std::string& dir) {
  std::vector<std::string> merges;
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  io::GgufMetadata kv;
  kv.push_back({"general.architecture", io::GgufValue::str("gemma4")});
  kv.push_back({"tokenizer.ggml.model", io::GgufValue::str("gemma4")});
  kv.push_back({"tokenizer.ggml.pre", io::GgufValue::str("gemma4")});
  kv.push_back({"tokenizer.ggml.tokens", io::GgufValue::strings(v.tokens)});
  kv.push_back({"tokenizer.ggml.token_type", io::GgufValue::i32s(v.types)});
  kv.push_back({"tokenizer.ggml.merges", io::GgufValue::strings(merges)});
  kv.push_back({"tokenizer.ggml.bos_token_id", io::GgufValue::u32(2)});
  kv.push_back({"tokenizer.ggml.eos_token_id", io::GgufValue::u32(1)});
  kv.push_back({"tokenizer.ggml.unknown_token_id", io::GgufValue::u32(3)});
  kv.push_back({"tokenizer.ggml.padding_token_id", io::GgufValue::u32(0)});
  const std::string path = dir + "/vocab.gguf";
  io::write_gguf(path, kv, {});
  return path;
}

// Texts that exercise each part of the layout: merges across a space,
// leading, repeated and trailing spaces, newline and tab runs, characters
// outside the vocabulary (byte fallback: ASCII, 2-, 3- and 4-byte UTF-8),
// the chat markers in a turn, a non-special added token, and nothing.
const std::vector<std::string>& samples() {
  static const std::vector<std::string> s = {
      "Hello world",
      "the cat is here",
      "  leading and    inner  spaces ",
      "lines\n\n\nand\n\n\n\n\ttabs\t\t\tend\n",
      "caf\u00e9 \u65e5\u672c z\u00fc \U0001F642 \u20ac",
      "<|turn>user\nHello world<turn|>\n<|turn>model\n",
      "<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>",
      "a <mask> b<unused3>",
      "Q",
      "",
  };
  return s;
}

struct Fixture {
  std::string dir, hf, gguf;
};
const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    x.dir = temp_dir("gemma4-tok");
    const Vocab v = gemma4_vocab();
    x.hf = write_hf(v, x.dir);
    x.gguf = write_gguf(v, x.dir);
    return x;
  }();
  return f;
}

TEST(Gemma4HfTokenizer, LayoutTokenizesAsTheGgufVocabulary) {
  const auto hf = io::load_tokenizer(fixture().hf);
  const auto gg = io::load_tokenizer(fixture().gguf);
  EXPECT_EQ(hf->kind(), "hf-bpe");
  EXPECT_EQ(gg->kind(), "gguf-gemma4");
  EXPECT_EQ(hf->vocab_size(), gg->vocab_size());
  EXPECT_EQ(hf->bos_id(), 2);
  EXPECT_TRUE(hf->adds_bos());
  for (const std::string& text : samples())
    for (bool special : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "text '" << text << "' add_special=" << special);
      const std::vector<int32_t> ids = hf->encode(text, special);
      EXPECT_EQ(ids, gg->encode(text, special));
      const size_t skip = special && !ids.empty() && ids[0] == 2 ? 1 : 0;
      const std::vector<int32_t> body(ids.begin() + long(skip), ids.end());
      EXPECT_EQ(hf->decode(body), text);
      EXPECT_EQ(gg->decode(body), text);
    }
  // The markers are single tokens at their ids; a character outside the
  // vocabulary is its UTF-8 bytes.
  EXPECT_EQ(hf->encode("<|turn>x<turn|>", false).front(), 105);
  EXPECT_EQ(hf->encode("<|turn>x<turn|>", false).back(), 106);
  EXPECT_EQ(hf->encode("z", false), (std::vector<int32_t>{107 + 'z'}));
}

// Hugging Face `tokenizers` (the reference venv) on the same tokenizer.json.
TEST(TransformersTokenizer, Gemma4LayoutMatchesHuggingFaceTokenizers) {
  MTP_REQUIRE_VENV(py, "reference", "scripts/install-reference.sh");
  const std::string texts = fixture().dir + "/texts.json";
  std::ofstream(texts) << json(samples()).dump();
  std::string out;
  const std::string script = std::string(MTPSPEC_SOURCE_DIR) + "/tests/python/hf_tokenize.py";
  ASSERT_EQ(run_python(py, shell_quote(script) + " " + shell_quote(fixture().hf) + " " +
                               shell_quote(texts), &out), 0) << out;
  const json ref = json::parse(out);
  const auto hf = io::load_tokenizer(fixture().hf);
  ASSERT_EQ(ref.size(), samples().size());
  for (size_t i = 0; i < samples().size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "text '" << samples()[i] << "'");
    EXPECT_EQ(hf->encode(samples()[i], false), ref[i]["plain"].get<std::vector<int32_t>>());
    EXPECT_EQ(hf->encode(samples()[i], true), ref[i]["special"].get<std::vector<int32_t>>());
    EXPECT_EQ(hf->decode(hf->encode(samples()[i], false)), ref[i]["decoded"].get<std::string>());
  }
}

// The vocabulary of a GGUF file's tokenizer.ggml.* arrays; added tokens of
// type control or unknown are special (llama.cpp's converter writes the
// published tokenizer's special added tokens as control, the others as
// user-defined).
Vocab gguf_vocab(const std::string& path) {
  const io::GgufFile f(path, io::GgufRead::MetadataOnly);
  const auto* tokens = f.get_array("tokenizer.ggml.tokens", io::GgufType::String);
  const auto* types = f.get_array("tokenizer.ggml.token_type");
  const auto* merges = f.get_array("tokenizer.ggml.merges", io::GgufType::String);
  if (!tokens || !types || !merges || types->size() != tokens->size()) {
    ADD_FAILURE() << path << ": no tokenizer.ggml tokens, token_type and merges of one length";
    return {};
  }
  Vocab v;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const auto type = int32_t((*types)[i].i);
    v.tokens.push_back((*tokens)[i].s);
    v.types.push_back(type);
    v.special.push_back(type == 2 || type == 3);
  }
  for (const io::GgufValue& m : *merges) {
    const size_t sp = m.s.find(' ');
    EXPECT_TRUE(sp != std::string::npos && m.s.find(' ', sp + 1) == std::string::npos) << m.s;
    v.merges.emplace_back(m.s.substr(0, sp), m.s.substr(sp + 1));
  }
  return v;
}

TEST(RealGemma4HfTokenizer, RealVocabularyInTheHfLayoutMatchesReferenceVectors) {
  MTP_REQUIRE_VOCAB_FILES(gguf, inp, out, "ggml-vocab-gemma-4.gguf");
  const Vocab v = gguf_vocab(gguf);
  ASSERT_EQ(v.tokens.size(), 262144u);
  ASSERT_EQ(v.merges.size(), 514906u);
  const auto hf = io::load_tokenizer(write_hf(v, temp_dir("gemma4-real-tok")));
  EXPECT_EQ(hf->kind(), "hf-bpe");
  EXPECT_EQ(hf->vocab_size(), 262144);
  EXPECT_EQ(hf->bos_id(), 2);
  EXPECT_TRUE(hf->adds_bos());
  const Vectors vec = read_vectors(inp, out);
  ASSERT_GT(vec.inputs.size(), 30u);
  for (size_t i = 0; i < vec.inputs.size(); ++i) {
    const std::vector<int32_t> ids = hf->encode(vec.inputs[i], /*add_special=*/false);
    EXPECT_EQ(ids, vec.ids[i]) << "vector #" << i << " '" << vec.inputs[i] << "'";
    EXPECT_EQ(hf->decode(ids), vec.inputs[i]) << "vector #" << i;
  }
  // The chat markers are single tokens at their ids.
  const std::vector<int32_t> ids =
      hf->encode("<|turn>user\nHi<turn|>\n<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>", true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 2);    // <bos>
  EXPECT_EQ(ids[1], 105);  // <|turn>
  for (auto [id, n] : {std::pair{106, 1}, std::pair{48, 1}, std::pair{49, 1}, std::pair{52, 2}})
    EXPECT_EQ(std::count(ids.begin(), ids.end(), id), n) << id;
}

}  // namespace
}  // namespace mtp::test
