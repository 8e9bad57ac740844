// Tokenizer contracts beyond raw ids: BOS/EOS rules, special-token text,
// llama2.c run.c semantics, UTF-8 repair and streaming, bad files and input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "io/tokenizer_fixture.h"
#include "tokenizer/tokenizer_llama2c.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mtp::io {
namespace {

std::string read_prefix(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string s(n, '\0');
  f.read(s.data(), std::streamsize(n));
  s.resize(size_t(f.gcount()));
  return s;
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string p = (fs::path(test::temp_dir("tok")) / name).string();
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// ---------------------------------------------------------------- llama2.c

// Straight port of llama2.c run.c encode()'s O(n^2) merge loop, to check the
// heap version against.
std::vector<int32_t> run_c_encode(const Llama2cTokenizer& t, const std::string& text) {
  std::map<std::string, int32_t> sorted;  // run.c: bsearch over the sorted vocab
  for (int32_t i = t.vocab_size() - 1; i >= 0; --i) sorted[t.piece(i)] = i;
  auto lookup = [&](const std::string& s) {
    auto it = sorted.find(s);
    return it == sorted.end() ? -1 : it->second;
  };
  std::vector<int32_t> toks{1};
  if (!text.empty()) toks.push_back(lookup(" "));
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && (uint8_t(text[i + n]) & 0xC0) == 0x80) ++n;
    const int32_t id = lookup(text.substr(i, n));
    if (id >= 0) {
      toks.push_back(id);
    } else {
      for (size_t k = 0; k < n; ++k) toks.push_back(int32_t(uint8_t(text[i + k])) + 3);
    }
    i += n;
  }
  while (true) {
    float best = -1e10f;
    int32_t best_id = -1, best_idx = -1;
    for (size_t i = 0; i + 1 < toks.size(); ++i) {
      const int32_t id = lookup(t.piece(toks[i]) + t.piece(toks[i + 1]));
      if (id != -1 && t.score(id) > best) {
        best = t.score(id);
        best_id = id;
        best_idx = int32_t(i);
      }
    }
    if (best_idx == -1) break;
    toks[size_t(best_idx)] = best_id;
    toks.erase(toks.begin() + best_idx + 1);
  }
  return toks;
}

TEST(Llama2cTokenizer, Stories260KEncodesAndDecodes) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/tok512.bin");
  auto tok = load_tokenizer(path);
  ASSERT_EQ(tok->kind(), "llama2c");
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  const std::string text = "Once upon a time";
  const auto ids = tok->encode(text);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_LT(ids.size(), text.size()) << "merges should shorten the sequence";
  EXPECT_EQ(tok->decode(ids), text);
  const auto& l2c = dynamic_cast<const Llama2cTokenizer&>(*tok);
  for (const std::string s : {"Once upon a time", "The cat sat. \"Hi!\" said Tom\n",
                              "héllo wörld 日本語 🙂", "aaaa"}) {
    EXPECT_EQ(tok->encode(s), run_c_encode(l2c, s)) << s;
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
  }
  MTP_REQUIRE_SHARED(corpus, "corpora/gutenberg-en-16MB.txt");
  const std::string para = test::corpus_sample("corpora/gutenberg-en-16MB.txt", 3000);
  EXPECT_EQ(tok->encode(para), run_c_encode(l2c, para));
  EXPECT_EQ(tok->encode("", true), std::vector<int32_t>{1});
  EXPECT_TRUE(tok->encode("", false).empty());
  // run.c decode(): the leading space is dropped only right after BOS.
  const int32_t once = ids[1];
  EXPECT_EQ(tok->token_bytes(once, 1), tok->token_bytes(once, 5).substr(1));
}

// ---------------------------------------------------------------- BOS / EOS

TEST(TokenizerSpecials, BosEosFollowTheContract) {
  MTP_REQUIRE_TOKENIZER(spm, "tokenizers/llama2.tokenizer.model");
  MTP_REQUIRE_TOKENIZER(l2, "tokenizers/llama2.tokenizer.json");
  MTP_REQUIRE_TOKENIZER(l3, "tokenizers/llama3.tokenizer.json");
  MTP_REQUIRE_TOKENIZER(qw, "tokenizers/qwen3.tokenizer.json");
  MTP_REQUIRE_TOKENIZER(gm, "tokenizers/gemma3.tokenizer.json");
  MTP_REQUIRE_TOKENIZER(g2, "tokenizers/gpt2.encoder.json");
  // Both Llama 2 tokenizers add <s> (model bos_id / template) and agree on it.
  EXPECT_TRUE(spm->adds_bos());
  EXPECT_TRUE(l2->adds_bos());
  EXPECT_EQ(spm->bos_id(), l2->bos_id());
  EXPECT_EQ(spm->eos_ids(), l2->eos_ids());
  EXPECT_EQ(l2->encode("Hello", true).front(), l2->bos_id());
  EXPECT_NE(l2->encode("Hello", false).front(), l2->bos_id());
  EXPECT_EQ(l2->encode("Hello", true).size(), l2->encode("Hello", false).size() + 1);
  // Gemma: template <bos>; Llama 3 here has no template and no add_bos_token,
  // so BOS is named but not added; Qwen has none; GPT-2 adds none.
  EXPECT_TRUE(gm->adds_bos());
  EXPECT_EQ(gm->encode("Hi", true).front(), gm->encode("<bos>", false).at(0));
  EXPECT_FALSE(l3->adds_bos());
  EXPECT_EQ(l3->bos_id(), l3->encode("<|begin_of_text|>", false).at(0));
  EXPECT_EQ(l3->eos_ids(), l3->encode("<|end_of_text|>", false));
  EXPECT_FALSE(qw->adds_bos());
  EXPECT_EQ(qw->bos_id(), -1);
  EXPECT_EQ(qw->eos_ids(), qw->encode("<|im_end|>", false));
  EXPECT_EQ(gm->eos_ids(), gm->encode("<end_of_turn>", false));
  EXPECT_FALSE(g2->adds_bos());
  EXPECT_EQ(g2->eos_ids(), g2->encode("<|endoftext|>", false));
}

TEST(TokenizerSpecials, SpecialTextIsAlwaysRecognised) {
  MTP_REQUIRE_TOKENIZER(qw, "tokenizers/qwen3.tokenizer.json");
  MTP_REQUIRE_TOKENIZER(spm, "tokenizers/llama2.tokenizer.model");
  const auto a = qw->encode("<|im_start|>user\nhi<|im_end|>", false);
  ASSERT_EQ(a.size(), 5u);  // special, "user", "\n", "hi", special
  EXPECT_EQ(qw->decode(a), "<|im_start|>user\nhi<|im_end|>");
  const auto b = spm->encode("x</s>y", false);
  EXPECT_NE(std::find(b.begin(), b.end(), spm->eos_ids().at(0)), b.end());
}

// ---------------------------------------------------------------- UTF-8

TEST(Utf8, SanitizeReplacesMaximalSubparts) {
  EXPECT_TRUE(is_valid_utf8("héllo 日本 🙂"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE3\x81"));          // truncated
  EXPECT_EQ(sanitize_utf8("a\xFF"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(sanitize_utf8("\xE3\x81"
                          "b"),
            "\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(sanitize_utf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(sanitize_utf8("ok"), "ok");
}

TEST(TextStream, ReassemblesSplitCharactersAndReplacesBadBytes) {
  TextStream s;
  EXPECT_EQ(s.push("\xE3"), "");
  EXPECT_EQ(s.push("\x81"), "");
  EXPECT_EQ(s.push("\x82"
                   "a"),
            "\xE3\x81\x82"
            "a");
  EXPECT_EQ(s.push("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(s.push("\xE3\x81"
                   "z"),
            "\xEF\xBF\xBD"
            "z");
  EXPECT_EQ(s.flush(), "");
}

TEST(TextStream, ByteFallbackTokensStreamWholeCharacters) {
  MTP_REQUIRE_TOKENIZER(tok, "tokenizers/llama2.tokenizer.model");
  const std::string text = "x 🦙 y";  // the llama emoji is not in the Llama 2 vocab
  const auto ids = tok->encode(text, true);
  size_t byte_tokens = 0;
  TextStream s;
  std::string streamed;
  int32_t prev = -1;
  for (int32_t id : ids) {
    const std::string b = tok->token_bytes(id, prev);
    if (b.size() == 1 && uint8_t(b[0]) >= 0x80) ++byte_tokens;
    const std::string piece = s.push(b);
    EXPECT_TRUE(is_valid_utf8(piece)) << "partial character streamed";
    streamed += piece;
    prev = id;
  }
  streamed += s.flush();
  EXPECT_EQ(byte_tokens, 4u) << "expected the emoji as four byte-fallback tokens";
  EXPECT_EQ(streamed, text);
  // A sequence cut inside the character decodes to U+FFFD, never to bad UTF-8.
  std::vector<int32_t> cut(ids.begin(), ids.end() - 3);
  EXPECT_TRUE(is_valid_utf8(tok->decode(cut)));
}

// ---------------------------------------------------------------- bad input

TEST(TokenizerErrors, InvalidUtf8InputIsInputError) {
  for (const auto& rel : test::all_tokenizer_paths()) {
    const Tokenizer* tok = test::shared_tokenizer(rel);
    if (!tok) continue;
    EXPECT_THROW(tok->encode("ok \xFF bad"), InputError) << rel;
    EXPECT_THROW(tok->encode("\xE3\x81"), InputError) << rel;
  }
  MTP_REQUIRE_SHARED(bin, "models/stories260K/tok512.bin");
  EXPECT_THROW(load_tokenizer(bin)->encode("\xC0\x80"), InputError);
}

TEST(TokenizerErrors, MissingFilesAreIoErrors) {
  const std::string dir = test::temp_dir("tok-missing");
  for (const char* name :
       {"tokenizer.json", "x.model", "tok.bin", "gpt2.encoder.json", "nothing"}) {
    EXPECT_THROW(load_tokenizer((fs::path(dir) / name).string()), IoError) << name;
  }
  EXPECT_THROW(load_tokenizer(dir), IoError) << "empty directory";
}

TEST(TokenizerErrors, TruncatedLlama2cBin) {
  MTP_REQUIRE_SHARED(bin, "models/stories260K/tok512.bin");
  const std::string full = read_prefix(bin, 1 << 20);
  for (size_t n :
       {size_t(0), size_t(2), size_t(6), size_t(13), full.size() / 2 + 1, full.size() - 1}) {
    const std::string p = write_temp("tok.bin", full.substr(0, n));
    try {
      load_tokenizer(p);
      ADD_FAILURE() << "no error for " << n << " of " << full.size() << " bytes";
    } catch (const IoError&) {
    } catch (const FormatError&) {
    }
  }
  std::string bad = full;
  bad[8] = '\x7F';  // first token's length becomes huge
  EXPECT_THROW(load_tokenizer(write_temp("bad.bin", bad)), FormatError);
}

TEST(TokenizerErrors, TruncatedOrCorruptTokenizerJson) {
  MTP_REQUIRE_SHARED(json, "tokenizers/llama2.tokenizer.json");
  const std::string head = read_prefix(json, 100000);
  for (size_t n : {size_t(0), size_t(1), size_t(500), head.size()}) {
    EXPECT_THROW(load_tokenizer(write_temp("tokenizer.json", head.substr(0, n))), FormatError) << n;
  }
  EXPECT_THROW(load_tokenizer(write_temp("tokenizer.json", R"({"model": 5})")), FormatError);
  EXPECT_THROW(
      load_tokenizer(write_temp("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0},
      "merges": ["a b"]}})")),
      FormatError);
  EXPECT_THROW(
      load_tokenizer(write_temp("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": "x"},
      "merges": []}})")),
      FormatError);
  EXPECT_THROW(load_tokenizer(
                   write_temp("tokenizer.json", R"({"model": {"type": "Unigram", "vocab": []}})")),
               ConfigError);
}

TEST(TokenizerErrors, TruncatedOrCorruptSentencePieceModel) {
  EXPECT_THROW(load_tokenizer(write_temp("tok.model", "not a protobuf at all")), FormatError);
  EXPECT_THROW(load_tokenizer(write_temp("empty.model", "")), FormatError);
  MTP_REQUIRE_SHARED(model, "tokenizers/llama2.tokenizer.model");
  const std::string full = read_prefix(model, 1 << 20);
  for (size_t n : {size_t(1), size_t(1000), full.size() / 2, full.size() - 1}) {
    try {
      load_tokenizer(write_temp("tokenizer.model", full.substr(0, n)));
      ADD_FAILURE() << "no error for " << n << " of " << full.size() << " bytes";
    } catch (const IoError&) {
    } catch (const FormatError&) {
    }
  }
}

// ---------------------------------------------------------------- factory

TEST(TokenizerFactory, DirectoriesAndFileKinds) {
  MTP_REQUIRE_SHARED(bin, "models/stories260K/tok512.bin");
  EXPECT_EQ(load_tokenizer(fs::path(bin).parent_path().string())->kind(), "llama2c");
  MTP_REQUIRE_SHARED(json, "tokenizers/llama2.tokenizer.json");
  MTP_REQUIRE_SHARED(model, "tokenizers/llama2.tokenizer.model");
  // A model directory: tokenizer.json wins over tokenizer.model.
  const std::string dir = test::temp_dir("tok-dir");
  fs::create_symlink(model, fs::path(dir) / "tokenizer.model");
  EXPECT_EQ(load_tokenizer(dir)->kind(), "sentencepiece");
  fs::create_symlink(json, fs::path(dir) / "tokenizer.json");
  EXPECT_EQ(load_tokenizer(dir)->kind(), "hf-bpe");
}

}  // namespace
}  // namespace mtp::io
