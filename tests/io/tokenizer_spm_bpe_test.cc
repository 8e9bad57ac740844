// Check of the rank-based heap BPE (tokenizer.json models) on the real Llama 2
// vocabulary.
//
// The Llama 2 SentencePiece model is converted here into a Hugging Face style
// BPE exactly as transformers' SentencePieceExtractor does (every piece that
// splits into two in-vocab pieces gives a merge; merges ordered by the merged
// piece's score), and run through the same HfTokenizer pipeline that
// tokenizer.json files use (Prepend "▁" + Replace " " normalizer, byte
// fallback). It must reproduce llama.cpp's llama-spm vectors, and agree token
// for token on real text with the .model tokenizer, a separate implementation
// (score-ordered merging of sentencepiece's bpe_model.cc, its own normalizer).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/tokenizer_fixture.h"
#include "tokenizer/tokenizer_hf.h"
#include "tokenizer/tokenizer_sentencepiece.h"
#include "test_util.h"

namespace mtp::io {
namespace {

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> cps;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    while (i + n < s.size() && (uint8_t(s[i + n]) & 0xC0) == 0x80) ++n;
    cps.push_back(s.substr(i, n));
    i += n;
  }
  return cps;
}

std::unique_ptr<Tokenizer> convert_spm_model(const SentencePieceTokenizer& sp) {
  using Type = SentencePieceTokenizer::PieceType;
  const int n = sp.vocab_size();
  detail::StringMap<int32_t> vocab;
  HfTokenizer::Parts parts;
  parts.source = "llama2.tokenizer.model (converted)";
  parts.kind = "hf-bpe";
  for (int id = 0; id < n; ++id) {
    vocab.emplace(sp.piece(id), id);
    parts.model_tokens.push_back(sp.piece(id));
  }
  struct M {
    std::string l, r;
    float score;
    int32_t lid, rid;
  };
  std::vector<M> merges;
  for (int id = 0; id < n; ++id) {
    const auto cps = code_points(sp.piece(id));
    std::vector<M> local;
    std::string left;
    for (size_t k = 1; k < cps.size(); ++k) {
      left += cps[k - 1];
      const std::string right = sp.piece(id).substr(left.size());
      auto l = vocab.find(left), r = vocab.find(right);
      if (l != vocab.end() && r != vocab.end())
        local.push_back({left, right, sp.score(id), l->second, r->second});
    }
    std::sort(local.begin(), local.end(), [](const M& a, const M& b) {
      return std::tie(a.lid, a.rid) < std::tie(b.lid, b.rid);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const M& a, const M& b) { return a.score > b.score; });
  std::vector<BpeModel::Merge> ranked;
  for (const auto& m : merges) ranked.emplace_back(m.l, m.r);

  BpeModel::Options opts;
  opts.byte_fallback = true;
  opts.fuse_unk = true;
  opts.unk_id = sp.unk_id();
  parts.model = std::make_unique<BpeModel>(opts, std::move(vocab), ranked, parts.source);
  parts.normalizer = make_normalizer(nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})"),
                                     parts.source);
  for (int id = 0; id < n; ++id) {
    if (sp.type(id) == Type::Control || sp.type(id) == Type::Unknown) {
      parts.added.push_back({sp.piece(id), id, /*special=*/true});
    }
  }
  parts.replacements = {{"\xE2\x96\x81", " "}};
  parts.decode_byte_fallback = true;
  parts.strip_leading_space = true;
  parts.bos = sp.bos_id();
  parts.prefix = {sp.bos_id()};
  parts.eos = sp.eos_ids();
  return std::make_unique<HfTokenizer>(std::move(parts));
}

const Tokenizer* converted_llama2() {
  static const std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(
        test::shared_tokenizer("tokenizers/llama2.tokenizer.model"));
    return sp ? convert_spm_model(*sp) : nullptr;
  }();
  return tok.get();
}

TEST(SpmAsHfBpe, LlamaSpmVectors) {
  const Tokenizer* tok = converted_llama2();
  if (!tok) GTEST_SKIP() << "shared data not found: ../shared/tokenizers/llama2.tokenizer.model";
  test::check_vectors(*tok, "llama-spm");
}

void expect_same_ids(const Tokenizer& a, const Tokenizer& b, const std::string& text,
                     const std::string& what) {
  const auto x = a.encode(text, false), y = b.encode(text, false);
  size_t i = 0;
  while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
  EXPECT_TRUE(i == x.size() && i == y.size()) << what << ": sizes " << x.size() << " vs "
                                              << y.size() << ", first difference at token " << i;
}

TEST(SpmAsHfBpe, AgreesWithSentencePieceModelOnCorpora) {
  const Tokenizer* tok = converted_llama2();
  MTP_REQUIRE_TOKENIZER(spm, "tokenizers/llama2.tokenizer.model");
  for (const char* corpus : {"corpora/gutenberg-en-16MB.txt", "corpora/aozora-ja-8MB.txt"}) {
    const std::string text = test::corpus_sample(corpus, 200 * 1024);
    if (text.empty()) GTEST_SKIP() << "shared corpus missing: " << corpus;
    expect_same_ids(*spm, *tok, text, corpus);
  }
}

// Whole corpora, in one call each.
TEST(HeavySpmAsHfBpe, AgreesWithSentencePieceModelOnWholeCorpora) {
  const Tokenizer* tok = converted_llama2();
  MTP_REQUIRE_TOKENIZER(spm, "tokenizers/llama2.tokenizer.model");
  for (const char* corpus : {"corpora/gutenberg-en-16MB.txt", "corpora/aozora-ja-8MB.txt"}) {
    const std::string text = test::corpus_sample(corpus, size_t(64) << 20);
    if (text.empty()) GTEST_SKIP() << "shared corpus missing: " << corpus;
    expect_same_ids(*spm, *tok, text, corpus);
  }
}

}  // namespace
}  // namespace mtp::io
