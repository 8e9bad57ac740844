#include "tokenizer/tokenizer_gguf.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_hf.h"
#include "tokenizer/tokenizer_sentencepiece.h"
#include "tokenizer/tokenizer_text.h"

namespace mtp::io {

namespace {

using PieceType = SentencePieceTokenizer::PieceType;

// The Split regexes of the Hugging Face tokenizer.json files these
// tokenizer.ggml.pre names stand for (Llama 3, Qwen2).
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

nlohmann::json split_then_byte_level(const char* regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", regex}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

struct Common {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // empty when the file has none
  int32_t bos = -1;
  std::vector<int32_t> eos;
  std::optional<bool> add_bos, add_eos;
};

Common read_common(const GgufFile& f) {
  Common c;
  const auto* toks = f.get_array("tokenizer.ggml.tokens", GgufType::String);
  if (!toks || toks->empty()) {
    fail<FormatError>("GGUF file '{}' has no tokenizer (tokenizer.ggml.tokens is missing or "
                      "empty); give a tokenizer file instead", f.path());
  }
  c.tokens.reserve(toks->size());
  for (auto& t : *toks) c.tokens.push_back(t.s);
  if (const auto* tt = f.get_array("tokenizer.ggml.token_type")) {
    if (tt->size() != c.tokens.size()) {
      fail<FormatError>("GGUF file '{}': tokenizer.ggml.token_type has {} entries for {} tokens",
                        f.path(), tt->size(), c.tokens.size());
    }
    for (auto& v : *tt) {
      if (!v.is_integer()) {
        fail<FormatError>("GGUF file '{}': tokenizer.ggml.token_type holds {}", f.path(),
                          v.describe());
      }
      const int64_t x = v.i != 0 ? v.i : int64_t(v.u);
      if (x < 0 || x > 6) {
        fail<FormatError>("GGUF file '{}': tokenizer.ggml.token_type holds unknown type {}",
                          f.path(), x);
      }
      c.types.push_back(int32_t(x));
    }
  }
  const auto n = int64_t(c.tokens.size());
  auto id = [&](const char* key) -> int32_t {
    const auto v = f.get_int(key);
    if (!v) return -1;
    if (*v < 0 || *v >= n) {
      fail<FormatError>("GGUF file '{}': {} = {} is outside the vocabulary of {} tokens", f.path(),
                        key, *v, n);
    }
    return int32_t(*v);
  };
  c.bos = id("tokenizer.ggml.bos_token_id");
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                        "tokenizer.ggml.eom_token_id"}) {
    const int32_t e = id(k);
    if (e >= 0 && std::find(c.eos.begin(), c.eos.end(), e) == c.eos.end()) c.eos.push_back(e);
  }
  c.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  c.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
  return c;
}

std::unique_ptr<Tokenizer> spm_tokenizer(const GgufFile& f, Common c) {
  SentencePieceTokenizer::Spec s;
  s.source = "GGUF file '" + f.path() + "'";
  const size_t n = c.tokens.size();
  if (const auto* sc = f.get_array("tokenizer.ggml.scores", GgufType::F32)) {
    if (sc->size() != n) {
      fail<FormatError>("GGUF file '{}': tokenizer.ggml.scores has {} entries for {} tokens",
                        f.path(), sc->size(), n);
    }
    for (auto& v : *sc) s.scores.push_back(float(v.f));
  } else {
    s.scores.assign(n, 0.0f);
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = c.types.empty() ? 1 : c.types[i];
    s.types.push_back(t == 0 ? PieceType::Normal : PieceType(t));
  }
  s.pieces = std::move(c.tokens);
  s.bos = c.bos;
  s.eos = std::move(c.eos);
  s.add_bos = c.add_bos.value_or(true);
  s.add_eos = c.add_eos.value_or(false);
  s.add_dummy_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  s.remove_extra_whitespaces =
      f.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
  return std::make_unique<SentencePieceTokenizer>(std::move(s));
}

std::unique_ptr<Tokenizer> bpe_tokenizer(const GgufFile& f, Common c) {
  HfTokenizer::Parts p;
  p.source = "GGUF file '" + f.path() + "'";
  p.kind = "gguf-gpt2";
  const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("");
  bool llama3 = false;
  if (pre == "gpt-2") {
    p.pre_tokenizer = make_byte_level_pre_tokenizer(/*add_prefix_space=*/false, /*use_regex=*/true);
  } else if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe") {
    p.pre_tokenizer = make_pre_tokenizer(split_then_byte_level(kLlama3Regex), p.source);
    llama3 = true;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    p.normalizer = make_normalizer({{"type", "NFC"}}, p.source);
    p.pre_tokenizer = make_pre_tokenizer(split_then_byte_level(kQwen2Regex), p.source);
  } else {
    fail<ConfigError>("GGUF file '{}': tokenizer.ggml.pre '{}' is not supported (supported: gpt-2, "
                      "llama3, llama-v3, llama-bpe, qwen2, deepseek-r1-qwen); give the model's "
                      "tokenizer.json instead", f.path(), pre);
  }
  const size_t n = c.tokens.size();
  detail::StringMap<int32_t> vocab;
  vocab.reserve(n);
  p.model_tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = c.types.empty() ? 1 : c.types[i];
    const std::string& t = c.tokens[i];
    // User-defined tokens are stored as their text; the others in GPT-2's
    // printable byte alphabet.
    std::string raw = type == 4 ? t : byte_level_decode(t).value_or(t);
    if (type == 3 || type == 4) {
      p.added.push_back({t, int32_t(i), /*special=*/type == 3});
    }
    vocab.emplace(raw, int32_t(i));
    p.model_tokens[i] = std::move(raw);
  }
  std::vector<BpeModel::Merge> merges;
  const auto* ms = f.get_array("tokenizer.ggml.merges", GgufType::String);
  if (!ms) fail<FormatError>("GGUF file '{}' has no tokenizer.ggml.merges (gpt2 model)", f.path());
  merges.reserve(ms->size());
  for (auto& m : *ms) {
    // llama.cpp splits at the first space after the first byte.
    const size_t sp = m.s.size() > 1 ? m.s.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos) {
      fail<FormatError>("GGUF file '{}': tokenizer.ggml.merges entry '{}' is not \"a b\"", f.path(),
                        m.s.substr(0, 80));
    }
    auto side = [](std::string_view s) { return byte_level_decode(s).value_or(std::string(s)); };
    merges.emplace_back(side(std::string_view(m.s).substr(0, sp)),
                        side(std::string_view(m.s).substr(sp + 1)));
  }
  BpeModel::Options opts;
  opts.byte_level = true;
  opts.ignore_merges = llama3;
  p.model = std::make_unique<BpeModel>(opts, std::move(vocab), merges, p.source);
  p.bos = c.bos;
  p.eos = c.eos;
  if (c.add_bos.value_or(llama3) && c.bos >= 0) p.prefix.push_back(c.bos);
  if (c.add_eos.value_or(false) && !c.eos.empty()) p.suffix.push_back(c.eos.front());
  return std::make_unique<HfTokenizer>(std::move(p));
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model").value_or("");
  if (model.empty()) {
    fail<FormatError>("GGUF file '{}' has no tokenizer (tokenizer.ggml.model is missing); give "
                      "a tokenizer file instead", f.path());
  }
  if (model != "llama" && model != "gpt2") {
    fail<ConfigError>("GGUF file '{}': tokenizer.ggml.model '{}' is not supported (supported: "
                      "llama, gpt2)", f.path(), model);
  }
  Common c = read_common(f);
  return model == "llama" ? spm_tokenizer(f, std::move(c)) : bpe_tokenizer(f, std::move(c));
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  return load_gguf_tokenizer(GgufFile(path, GgufRead::MetadataOnly));
}

}  // namespace mtp::io
