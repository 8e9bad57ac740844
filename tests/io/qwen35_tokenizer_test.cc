// Qwen3.5's tokenizer: the published tokenizer.json layout (byte-level BPE,
// NFC normalizer, a Split whose regex keeps combining marks \p{M} with their
// letters and splits digits one by one, then ByteLevel without its own regex;
// transformers' Qwen3_5Tokenizer builds the same) and llama.cpp's GGUF
// pre-tokenizer "qwen35" (the same regex, no normalizer).
// - Qwen35Tokenizer.*Fixture*: a small vocabulary in that layout, written
//   here (tokenizer.json and the GGUF llama.cpp's converter would write from
//   it): the regex's own consequences (a mark stays with its letter, digits
//   never merge, NFC composes), both files equal, and the Qwen 3 layout
//   differing where the regexes differ.
// - TransformersRef: Hugging Face's `tokenizers` library (the reference venv)
//   on the same fixture and texts gives the same ids (label `reference`).
// - llama.cpp's ggml-vocab-qwen35.gguf and its reference vectors, which
//   bench/real-models.sh --install puts in the `real` venv's models/ (skipped
//   when absent): llama.cpp's test file for the "qwen35" pre-tokenizer holds
//   the Qwen 2 vocabulary (151,936 tokens, <|im_start|> at 151644) under that
//   pre-tokenizer name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/gguf.h"
#include "io/tokenizer_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_bpe.h"
#include "venv_util.h"

namespace mtp::test {
namespace {

using nlohmann::json;

// The published Split regex (Qwen3.5) and Qwen 3's, which lacks \p{M}.
constexpr const char* kQwen35Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen3Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen3.5's chat and end tokens (added tokens after the BPE vocabulary).
const std::vector<std::string> kQwenAdded = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                             "<think>",       "</think>",     "<tool_call>",
                                             "</tool_call>"};

// Bytes in GPT-2's printable alphabet.
std::string byte_chars(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    const uint32_t cp = io::byte_to_unicode()[b];
    if (cp < 0x80) {
      out += char(cp);
    } else {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

// One UTF-8 character at a time of a byte-level string.
std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = (uint8_t(s[i]) & 0x80) == 0 ? 1 : (uint8_t(s[i]) & 0xE0) == 0xC0 ? 2 : 3;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// The fixture's vocabulary: the 256 byte characters, then for each word the
// merges that make it one token: the word is merged by the ranks so far and,
// while more than one symbol is left, the first two get a new merge (so a
// word the pre-tokenizer keeps whole is one token; a word's later merges
// never fire before its earlier ones).
struct Fixture {
  std::vector<std::string> tokens;  // by id
  std::vector<std::string> merges;  // "a b", by rank
  int32_t id(const std::string& bytes) const {
    const std::string t = byte_chars(bytes);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == t) return int32_t(i);
    }
    return -1;
  }
  // The word's symbols after the merges so far (lowest rank first).
  std::vector<std::string> merged(const std::string& word) const {
    std::vector<std::string> sym = chars_of(byte_chars(word));
    for (;;) {
      size_t best = merges.size(), at = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        const auto r = std::find(merges.begin(), merges.end(), sym[i] + " " + sym[i + 1]);
        if (size_t(r - merges.begin()) < best) best = size_t(r - merges.begin()), at = i;
      }
      if (best == merges.size()) return sym;
      sym[at] += sym[at + 1];
      sym.erase(sym.begin() + long(at) + 1);
    }
  }
};

Fixture make_fixture() {
  Fixture f;
  for (int b = 0; b < 256; ++b) f.tokens.push_back(byte_chars(std::string(1, char(b))));
  const std::vector<std::string> words = {
      "hello", " world", "x\xCC\x81", "\xC3\xA9", "12", "'s", "\n\n", " ",
      "\xE0\xA4\xA8\xE0\xA4\xAE", "user", "assistant", "\xCC\x81\xCC\x81"};
  for (const std::string& w : words) {
    for (std::vector<std::string> sym = f.merged(w); sym.size() > 1; sym = f.merged(w)) {
      f.merges.push_back(sym[0] + " " + sym[1]);
      f.tokens.push_back(sym[0] + sym[1]);
    }
  }
  return f;
}

// tokenizer.json as Qwen publishes it (and Qwen3_5Tokenizer builds it), with
// the Split regex `split`.
std::string write_tokenizer_json(const Fixture& f, const std::string& split,
                                 const std::string& tag) {
  json vocab = json::object();
  for (size_t i = 0; i < f.tokens.size(); ++i) vocab[f.tokens[i]] = i;
  json added = json::array();
  for (size_t i = 0; i < kQwenAdded.size(); ++i) {
    const bool special = kQwenAdded[i].front() == '<' && kQwenAdded[i][1] == '|';
    added.push_back({{"id", f.tokens.size() + i}, {"content", kQwenAdded[i]},
                     {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", special}});
  }
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                           {"trim_offsets", false}, {"use_regex", false}};
  const json doc = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"}, {"pattern", {{"Regex", split}}},
                       {"behavior", "Isolated"}, {"invert", false}},
                      byte_level})}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
        {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"fuse_unk", false},
        {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", vocab},
        {"merges", f.merges}}}};
  const std::string path = temp_dir("qwen35-tok") + "/" + tag + ".tokenizer.json";
  std::ofstream(path) << doc.dump();
  return path;
}

// The GGUF llama.cpp's converter writes for the fixture: tokens in id order
// (added tokens typed CONTROL), "a b" merges, tokenizer.ggml.pre `pre`.
std::string write_fixture_gguf(const Fixture& f, const std::string& pre) {
  std::vector<std::string> tokens = f.tokens;
  std::vector<int32_t> types(tokens.size(), 1);
  for (const std::string& a : kQwenAdded) {
    tokens.push_back(a);
    types.push_back(3);
  }
  io::GgufMetadata kv;
  kv.push_back({"general.architecture", io::GgufValue::str("qwen35")});
  kv.push_back({"tokenizer.ggml.model", io::GgufValue::str("gpt2")});
  kv.push_back({"tokenizer.ggml.pre", io::GgufValue::str(pre)});
  kv.push_back({"tokenizer.ggml.tokens", io::GgufValue::strings(tokens)});
  kv.push_back({"tokenizer.ggml.token_type", io::GgufValue::i32s(types)});
  kv.push_back({"tokenizer.ggml.merges", io::GgufValue::strings(f.merges)});
  const std::string path = temp_dir("qwen35-tok") + "/" + pre + ".gguf";
  io::write_gguf(path, kv, {});
  return path;
}

// Texts covering each alternative of the regex, marks in three scripts,
// digits, contractions, line ends, the chat markers.
const std::vector<std::string>& fixture_texts() {
  static const std::vector<std::string> t = {
      "hello world",
      "x\xCC\x81x\xCC\x81 x\xCC\x81",                 // x + combining acute
      "\xC3\xA9 and e\xCC\x81",                       // é precomposed / decomposed
      "12 345 6789",
      "it's HELLO'S 'Ll",
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",  // नमस्ते
      "\xD8\xA7\xD9\x8E\xD8\xA8",                     // Arabic with a fatha
      " \xCC\x81\xCC\x81 marks alone",
      "a\r\n\r\nb\n\n\nc  \n",
      "  spaces   end  ",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",         // 日本語
      "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
      "<tool_call>\n<function=f>\n</function>\n</tool_call>",
      "$(echo 'x')!!\t{}\xF0\x9F\x98\x80",
  };
  return t;
}

TEST(Qwen35Tokenizer, FixtureKeepsMarksWithLettersAndDigitsApart) {
  const Fixture f = make_fixture();
  const auto tok = io::load_tokenizer(write_tokenizer_json(f, kQwen35Split, "qwen35"));
  // x + U+0301 is one pre-token ([\p{L}\p{M}]+), so its merge applies.
  EXPECT_EQ(tok->encode("x\xCC\x81", false), (std::vector<int32_t>{f.id("x\xCC\x81")}));
  // Devanagari: the vowel sign is a mark, the word one pre-token and one token.
  EXPECT_EQ(tok->encode("\xE0\xA4\xA8\xE0\xA4\xAE", false),
            (std::vector<int32_t>{f.id("\xE0\xA4\xA8\xE0\xA4\xAE")}));
  // Digits are single pre-tokens: the "1 2" merge never applies.
  EXPECT_EQ(tok->encode("12", false), (std::vector<int32_t>{f.id("1"), f.id("2")}));
  // NFC: e + U+0301 is é before the split.
  EXPECT_EQ(tok->encode("e\xCC\x81", false), (std::vector<int32_t>{f.id("\xC3\xA9")}));
  // Marks after a space are one pre-token with it (the space is the
  // optional lead of [\p{L}\p{M}]+); no merge joins the space, so the space
  // and the marks' own merged token.
  EXPECT_EQ(tok->encode(" \xCC\x81\xCC\x81", false),
            (std::vector<int32_t>{f.id(" "), f.id("\xCC\x81\xCC\x81")}));
  // The chat markers are single tokens; decoding gives the text back.
  const int32_t base = int32_t(f.tokens.size());
  const std::string chat = "<|im_start|>user\nhello<|im_end|>";
  EXPECT_EQ(tok->encode(chat, false),
            (std::vector<int32_t>{base + 1, f.id("user"), f.id("\n"), f.id("hello"), base + 2}));
  for (const std::string& t : fixture_texts()) {
    if (t.find("e\xCC\x81") != std::string::npos) continue;  // NFC changes it
    EXPECT_EQ(tok->decode(tok->encode(t, false)), t) << t;
  }
}

TEST(Qwen35Tokenizer, FixtureGgufPreQwen35EncodesAsTheTokenizerJson) {
  const Fixture f = make_fixture();
  const auto hf = io::load_tokenizer(write_tokenizer_json(f, kQwen35Split, "qwen35"));
  const auto gguf = io::load_tokenizer(write_fixture_gguf(f, "qwen35"));
  const auto qwen2 = io::load_tokenizer(write_fixture_gguf(f, "qwen2"));
  for (const std::string& t : fixture_texts()) {
    if (t.find("e\xCC\x81") != std::string::npos) continue;  // llama.cpp has no NFC step
    EXPECT_EQ(gguf->encode(t, false), hf->encode(t, false)) << t;
  }
  // The Qwen 2/3 regex (GGUF "qwen2", the Qwen 3 tokenizer.json) splits the
  // mark from its letter: these fixtures tell the two apart.
  const auto qwen3 = io::load_tokenizer(write_tokenizer_json(f, kQwen3Split, "qwen3"));
  EXPECT_EQ(qwen2->encode("x\xCC\x81", false), (std::vector<int32_t>{f.id("x"), f.id("\xCC\x81")}));
  EXPECT_EQ(qwen3->encode("x\xCC\x81", false), qwen2->encode("x\xCC\x81", false));
}

TEST(Qwen35Tokenizer, TransformersRefTokenizersLibraryEncodesTheFixtureAlike) {
  MTP_REQUIRE_VENV(py, "reference", "scripts/install-reference.sh");
  const Fixture f = make_fixture();
  const std::string path = write_tokenizer_json(f, kQwen35Split, "qwen35");
  const auto tok = io::load_tokenizer(path);
  const std::string texts = temp_dir("qwen35-tok") + "/texts.json";
  std::ofstream(texts) << json(fixture_texts()).dump();
  std::string out;
  const std::string script = std::string(MTPSPEC_SOURCE_DIR) + "/tests/python/tokenizers_encode.py";
  ASSERT_EQ(run_python(py, shell_quote(script) + " " + shell_quote(path) + " " + shell_quote(texts),
                       &out), 0) << out;
  const json ref = json::parse(out);
  ASSERT_EQ(ref.at("ids").size(), fixture_texts().size());
  for (size_t i = 0; i < fixture_texts().size(); ++i) {
    EXPECT_EQ(tok->encode(fixture_texts()[i], false),
              ref["ids"][i].get<std::vector<int32_t>>()) << fixture_texts()[i];
  }
  std::cout << "reference: tokenizers " << ref.at("version").get<std::string>() << "\n";
}

TEST(Qwen35Tokenizer, GgufVocabularyMatchesReferenceVectors) {
  MTP_REQUIRE_VOCAB_FILES(path, inp, out, "ggml-vocab-qwen35.gguf");
  const auto tok = io::load_tokenizer(path);
  EXPECT_EQ(tok->vocab_size(), 151936);
  const Vectors v = read_vectors(inp, out);
  ASSERT_GT(v.inputs.size(), 30u);
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    EXPECT_EQ(tok->encode(v.inputs[i], /*add_special=*/false), v.ids[i]) << "vector #" << i;
    EXPECT_EQ(tok->decode(tok->encode(v.inputs[i], false)), v.inputs[i]) << "vector #" << i;
  }
  EXPECT_EQ(tok->encode("<|im_start|>user", false)[0], 151644);
}

}  // namespace
}  // namespace mtp::test
