// Inputs that disagree with themselves or with the model: duplicate keys and
// bytes no tensor owns in safetensors files; duplicate or out-of-range ids in
// tokenizer.json; tokenizers that do not cover the model's vocabulary; ids
// without a piece. Each is a typed error (or U+FFFD), never a silent answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/prompts.h"
#include "io/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_hf.h"
#include "test_util.h"

using nlohmann::json;

namespace mtp::io {
namespace {

using test::expect_error;

std::string write_file(const std::string& tag, const std::string& name, const std::string& bytes) {
  std::string p = test::temp_dir(tag) + "/" + name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return p;
}

std::string st_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + data;
}

// ---------------------------------------------------------------- safetensors

TEST(SafetensorsHardening, DuplicateKeysAreRefused) {
  std::string p = write_file("sth", "dup.safetensors",
                             st_bytes(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                      R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                      std::string(8, '\0')));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {p, "'t'", "twice"});
  p = write_file("sth", "dupmeta.safetensors",
                 st_bytes(R"({"__metadata__":{"a":"1"},"__metadata__":{"a":"2"}})", ""));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {p, "__metadata__", "twice"});
  // Same key names nested deeper are fine (dtype/shape inside different entries).
  p = write_file("sth", "ok.safetensors",
                 st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                          std::string(8, '\0')));
  EXPECT_EQ(SafetensorsFile(p).num_tensors(), 2u);
}

TEST(SafetensorsHardening, TrailingBytesAndGapsAreRefused) {
  const std::string h = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  for (size_t extra : {1, 4, 4096}) {
    std::string p = write_file("sth", "trail.safetensors", st_bytes(h, std::string(4 + extra, 'x')));
    expect_error<FormatError>([&] { SafetensorsFile{p}; },
                              {p, std::to_string(extra) + " trailing bytes"});
  }
  // No tensors at all, but a data section.
  std::string p = write_file("sth", "empty.safetensors", st_bytes("{}", "abcd"));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {p, "4 trailing bytes"});
  // A hole between two tensors, and one before the first.
  p = write_file("sth", "gap.safetensors",
                 st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                          std::string(12, '\0')));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {p, "[4, 8)", "no tensor", "'b'"});
  p = write_file("sth", "gap0.safetensors",
                 st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                          std::string(8, '\0')));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {p, "[0, 4)"});
  // Exactly tiled, with zero-size tensors anywhere on the boundaries: fine.
  p = write_file("sth", "tiled.safetensors",
                 st_bytes(R"({"z0":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                          R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("z1":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                          std::string(8, '\0')));
  EXPECT_EQ(SafetensorsFile(p).num_tensors(), 4u);
}

TEST(SafetensorsHardening, WriterOutputStillReads) {
  std::vector<float> a = {1, 2, 3};
  std::vector<uint8_t> b = {1};
  std::vector<float> e;
  std::string p = test::temp_dir("sth") + "/w.safetensors";
  write_safetensors(p, {make_view("a", DType::F32, {3}, a), make_view("b", DType::U8, {1}, b),
                        make_view("e", DType::F32, {0}, e)});
  EXPECT_EQ(SafetensorsFile(p).num_tensors(), 3u);
}

// ---------------------------------------------------------------- tokenizer.json

// A byte-level BPE tokenizer.json with the given vocab and added tokens.
std::string tokenizer_json(const json& vocab, const json& added = json::array()) {
  json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false},
                               {"trim_offsets", true}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"added_tokens", added}};
  return j.dump();
}

TEST(TokenizerHardening, DuplicateIdsAreRefused) {
  std::string p = write_file("tokh", "tokenizer.json",
                             tokenizer_json({{"a", 0}, {"b", 1}, {"c", 1}}));
  expect_error<FormatError>([&] { load_tokenizer(p); }, {p, "id 1", "'b'", "'c'"});
  p = write_file("tokh", "tokenizer.json",
                 tokenizer_json({{"a", 0}, {"b", 1}},
                                {{{"id", 2}, {"content", "<x>"}, {"special", true}},
                                 {{"id", 2}, {"content", "<y>"}, {"special", true}}}));
  expect_error<FormatError>([&] { load_tokenizer(p); }, {p, "id 2", "<x>", "<y>"});
  // An added token naming a vocab entry's id is what real files do (<s> = 1).
  p = write_file("tokh", "tokenizer.json",
                 tokenizer_json({{"a", 0}, {"<s>", 1}},
                                {{{"id", 1}, {"content", "<s>"}, {"special", true}}}));
  EXPECT_EQ(load_tokenizer(p)->vocab_size(), 2);
}

TEST(TokenizerHardening, HugeOrNonIntegerIdsAreRefusedWithoutAllocating) {
  for (json id : {json(int64_t(1) << 31), json(int64_t(1) << 24), json(-1), json(1.5), json("7")}) {
    SCOPED_TRACE(id.dump());
    std::string p = write_file("tokh", "tokenizer.json", tokenizer_json({{"a", 0}, {"b", id}}));
    expect_error<FormatError>([&] { load_tokenizer(p); }, {p, "'b'"});
    p = write_file("tokh", "tokenizer.json",
                   tokenizer_json({{"a", 0}}, {{{"id", id}, {"content", "<x>"}}}));
    try {
      load_tokenizer(p);
      ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
}

// Found by tests/fuzz/json_probe.py (UBSan): ids and counts read with
// nlohmann's get<int>() cast 1e300 to int (undefined behaviour, garbage ids).
TEST(TokenizerHardening, NonIntegerIdsInPostProcessorAndDecoderAreRefused) {
  json j = json::parse(tokenizer_json({{"a", 0}, {"<s>", 1}}));
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}}}}}};
  std::string p = write_file("tokh", "tokenizer.json", j.dump());
  EXPECT_EQ(load_tokenizer(p)->bos_id(), 1);
  for (json bad : {json(1e300), json(-1), json(1.5), json(int64_t(1) << 40)}) {
    SCOPED_TRACE(bad.dump());
    j["post_processor"]["special_tokens"]["<s>"]["ids"] = {bad};
    p = write_file("tokh", "tokenizer.json", j.dump());
    expect_error<FormatError>([&] { load_tokenizer(p); }, {p, "token id"});
  }
  j.erase("post_processor");
  j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 1e300}, {"stop", 0}};
  p = write_file("tokh", "tokenizer.json", j.dump());
  expect_error<FormatError>([&] { load_tokenizer(p); }, {p, "start"});
}

TEST(TokenizerHardening, IdsWithoutAPieceDecodeAsReplacementCharacter) {
  // Ids 0, 1 and 3: id 2 is a gap; 4 and beyond are outside the vocabulary.
  std::string p = write_file("tokh", "tokenizer.json", tokenizer_json({{"a", 0}, {"b", 1}, {"c", 3}}));
  auto tok = load_tokenizer(p);
  ASSERT_EQ(tok->vocab_size(), 4);
  EXPECT_EQ(tok->token_bytes(0, -1), "a");
  EXPECT_EQ(tok->token_bytes(3, -1), "c");
  EXPECT_EQ(tok->token_bytes(2, -1), std::string(kNoPiece));
  EXPECT_EQ(tok->token_bytes(4, -1), std::string(kNoPiece));
  EXPECT_EQ(tok->token_bytes(-1, -1), std::string(kNoPiece));
  EXPECT_EQ(tok->token_bytes(151935, -1), std::string(kNoPiece));
  const std::vector<int32_t> ids = {0, 2, 1, 9, 3};
  EXPECT_EQ(tok->decode(ids), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c");
}

// Every tokenizer format: an id past its vocabulary is U+FFFD.
TEST(TokenizerHardening, EveryFormatDecodesUnknownIdsAsReplacementCharacter) {
  std::vector<std::string> paths = {"models/stories260K/tok512.bin"};
  for (const char* rel : {"tokenizers/llama2.tokenizer.model", "tokenizers/qwen3.tokenizer.json",
                          "tokenizers/gpt2.encoder.json"}) {
    paths.push_back(rel);
  }
  int tested = 0;
  for (const auto& rel : paths) {
    std::string p = test::shared_path(rel);
    if (p.empty()) continue;
    SCOPED_TRACE(rel);
    auto tok = load_tokenizer(p);
    EXPECT_EQ(tok->token_bytes(tok->vocab_size(), -1), std::string(kNoPiece));
    EXPECT_EQ(tok->token_bytes(tok->vocab_size() + 1000, 5), std::string(kNoPiece));
    EXPECT_EQ(tok->token_bytes(-3, -1), std::string(kNoPiece));
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "no shared tokenizers";
}

// ---------------------------------------------------------------- prompts

// Found by probing the fuzz_prompts target: a non-string "lang" escaped as a
// nlohmann::type_error (not an mtp::Error), which the CLI does not map to exit 2.
TEST(PromptsHardening, NonStringFieldsAreFormatErrors) {
  std::string p = write_file("prh", "p.jsonl", "{\"prompt\": \"x\", \"lang\": 5}\n");
  expect_error<FormatError>([&] { read_prompts(p); }, {p + ":1", "lang", "5"});
  p = write_file("prh", "p.jsonl", "{\"prompt\": \"x\", \"lang\": null}\n{\"prompt\": 3}\n");
  expect_error<FormatError>([&] { read_prompts(p); }, {p + ":2"});
  p = write_file("prh", "p.jsonl", "{\"prompt\": \"x\", \"lang\": \"en\"}\n");
  EXPECT_EQ(read_prompts(p).at(0).lang, "en");
  p = write_file("prh", "p.jsonl", "{\"prompt\": \"x\", \"kind\": [1]}\n");
  expect_error<FormatError>([&] { read_prompts(p); }, {p + ":1", "kind", "[1]"});
  p = write_file("prh", "p.jsonl", "{\"prompt\": \"x\", \"kind\": \"quote\"}\n{\"prompt\": \"y\"}\n");
  EXPECT_EQ(read_prompts(p).at(0).kind, "quote");
  EXPECT_EQ(read_prompts(p).at(1).kind, "");
}

// ---------------------------------------------------------------- coverage

// A stand-in tokenizer of a given size.
class SizedTokenizer : public Tokenizer {
 public:
  explicit SizedTokenizer(int32_t n) : n_(n) {}
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string token_bytes(int32_t, int32_t) const override { return {}; }
  int32_t vocab_size() const override { return n_; }
  int32_t bos_id() const override { return -1; }
  bool adds_bos() const override { return false; }
  std::vector<int32_t> eos_ids() const override { return {}; }
  std::string kind() const override { return "sized"; }

 private:
  int32_t n_;
};

std::string warnings_of(int64_t model_vocab, int32_t tok_vocab) {
  std::FILE* f = std::tmpfile();
  check_tokenizer_covers(model_vocab, SizedTokenizer(tok_vocab), "/t/tokenizer.json", f);
  std::rewind(f);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  std::fclose(f);
  return out;
}

TEST(TokenizerCoverage, RefusesTooSmallOrTooLargeWarnsOnSmallGaps) {
  // Exact: silent.
  EXPECT_EQ(warnings_of(32000, 32000), "");
  // Qwen 2.5: 151,665 tokens, 151,936 embedding rows: one warning line.
  std::string w = warnings_of(151936, 151665);
  EXPECT_NE(w.find("151665"), std::string::npos) << w;
  EXPECT_NE(w.find("151936"), std::string::npos) << w;
  EXPECT_NE(w.find("U+FFFD"), std::string::npos) << w;
  EXPECT_EQ(std::count(w.begin(), w.end(), '\n'), 1);
  // 90 % exactly is allowed; below is refused, naming both sizes.
  EXPECT_NE(warnings_of(1000, 900), "");
  expect_error<ConfigError>([] { warnings_of(1000, 899); },
                            {"/t/tokenizer.json", "899", "1000", "90 %"});
  expect_error<ConfigError>([] { warnings_of(151936, 512); }, {"512", "151936"});
  expect_error<ConfigError>([] { warnings_of(512, 32000); }, {"32000", "512"});
  expect_error<ConfigError>([] { warnings_of(512, 513); }, {"513", "512"});
  // No warning stream: still checks.
  EXPECT_NO_THROW(check_tokenizer_covers(100, SizedTokenizer(95), "x", nullptr));
  expect_error<ConfigError>([] { check_tokenizer_covers(100, SizedTokenizer(5), "x", nullptr); },
                            {"5", "100"});
}

}  // namespace
}  // namespace mtp::io
