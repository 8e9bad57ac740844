// Hostile inputs of the io layer (issue 60): deeply nested JSON in every
// reader, catastrophic tokenizer regexes, type errors naming the field, and
// prompt sets that keep the user's ids. Each is a typed error within bounded
// time, never a crash or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/corpus.h"
#include "io/prompts.h"
#include "tokenizer/tokenizer.h"
#include "test_util.h"

namespace mtp::io {
namespace {

using nlohmann::json;
using test::expect_error;
using Clock = std::chrono::steady_clock;

std::string put_file(const std::string& tag, const std::string& name, const std::string& bytes) {
  const std::string p = test::temp_dir(tag) + "/" + name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  return p;
}

std::string deep(const std::string& open, const std::string& close, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += open;
  s += "null";
  for (size_t i = 0; i < n; ++i) s += close;
  return s;
}

// A byte-level BPE tokenizer.json over the 26 lower-case letters and '!'.
json letters_tokenizer() {
  json vocab = json::object();
  for (int c = 0; c < 26; ++c) vocab[std::string(1, char('a' + c))] = c;
  vocab["!"] = 26;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
          {"pre_tokenizer", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"added_tokens", json::array()}};
}

// tokenizer.json normalizers, pre-tokenizers and decoders are built
// recursively: 200,000 nested Sequences crashed the loader.
TEST(DeepJson, TokenizerPipelinesAreRefusedNamingTheField) {
  std::string text = letters_tokenizer().dump();
  const std::string nested = deep(R"({"type": "Sequence", "normalizers": [)", "]}", 200000);
  text.replace(text.find("\"pre_tokenizer\":null"), 20, "\"normalizer\":" + nested);
  const std::string p = put_file("deep-tok", "tokenizer.json", text);
  const auto t0 = Clock::now();
  expect_error<FormatError>([&] { load_tokenizer(p); }, {p, "deeper than", "normalizer.normalizers[]"});
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

TEST(DeepJson, PromptAndCorpusLinesAreRefusedNamingTheLine) {
  const std::string line = R"({"prompt": "x", "lang": )" + deep("[", "]", 300000) + "}\n";
  std::string p = put_file("deep-prompts", "p.jsonl", "{\"prompt\": \"ok\"}\n" + line);
  expect_error<FormatError>([&] { read_prompts(p); }, {p + ":2", "deeper than", "lang"});
  p = put_file("deep-corpus", "c.jsonl", R"({"text": )" + deep(R"({"a": )", "}", 300000) + "}\n");
  std::vector<std::string> docs;
  expect_error<FormatError>([&] { read_corpus(p, docs); }, {p + ":1", "deeper than", "text.a.a"});
}

// A Split with a catastrophic pattern made a 41-byte prompt tokenise for more
// than 20 s: the regex work is bounded and the pattern named.
TEST(TokenizerRegex, CatastrophicPatternsAreRefusedNamingThem) {
  const std::string prompt = std::string(40, 'a') + "!";
  json j = letters_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}},
                        {"behavior", "Isolated"}, {"invert", false}};
  std::string p = put_file("regex-split", "tokenizer.json", j.dump());
  auto t0 = Clock::now();
  expect_error<InputError>([&] { load_tokenizer(p)->encode(prompt, false); }, {"(a+)+$"});
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  // Another member: a Replace normalizer.
  j["pre_tokenizer"] = nullptr;
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(a|aa)+$"}}}, {"content", "b"}};
  p = put_file("regex-replace", "tokenizer.json", j.dump());
  t0 = Clock::now();
  expect_error<InputError>([&] { load_tokenizer(p)->encode(std::string(60, 'a') + "!", false); },
                           {"(a|aa)+$"});
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  // The same patterns on text they match at once still tokenize.
  EXPECT_EQ(load_tokenizer(p)->encode("aaa", false).size(), 1u);
}

TEST(TokenizerRegex, HfPatternsKeepTheirMeaning) {
  json j = letters_tokenizer();
  j["model"]["vocab"][" "] = 27;
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", R"(\s+(?!\S)|\s+|\w+|[^\w\s]+)"}}},
                        {"behavior", "Isolated"}, {"invert", false}};
  const std::string p = put_file("regex-meaning", "tokenizer.json", j.dump());
  // "ab  c!" -> "ab", " " (\s+ backs off so that no \S follows), " ", "c", "!".
  const auto ids = load_tokenizer(p)->encode("ab  c!", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 27, 27, 2, 26}));
}

TEST(PromptSets, TheUsersIdIsKept) {
  const std::string p = put_file("prompt-ids", "p.jsonl",
                                 "{\"prompt\": \"a\", \"id\": \"q-17\"}\n"
                                 "{\"prompt\": \"b\"}\n"
                                 "{\"prompt\": \"c\", \"id\": 42}\n");
  const auto v = read_prompts(p);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].id_or(0), "q-17");
  EXPECT_EQ(v[1].id_or(1), 1);
  EXPECT_EQ(v[2].id_or(2), 42);
  EXPECT_EQ(v[0].label(0), "q-17");
  const std::string bad = put_file("prompt-ids", "bad.jsonl", "{\"prompt\": \"a\", \"id\": {\"x\": 1}}\n");
  expect_error<FormatError>([&] { read_prompts(bad); }, {bad + ":1", "'id'", "an object"});
}

}  // namespace
}  // namespace mtp::io
