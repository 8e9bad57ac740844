#include "tokenizer/tokenizer_gguf.h"

#include <algorithm>
#include <array>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_hf.h"
#include "tokenizer/tokenizer_sentencepiece.h"
#include "tokenizer/tokenizer_text.h"

namespace mtp::io {

namespace {

using PieceType = SentencePieceTokenizer::PieceType;

// Split regexes, applied one after the other (each isolates its matches)
// before the byte-level mapping, as llama.cpp's pre-tokenizer types do.
constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen35Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// One row per llama.cpp pre-tokenizer type we implement: the
// tokenizer.ggml.pre names that select it, its regexes, whether a word that
// is a whole token skips the merges, and whether BOS is added by default.
struct PreTokenizerRule {
  std::vector<const char*> names;
  std::vector<const char*> regexes;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<PreTokenizerRule>& pre_tokenizer_rules() {
  static const std::vector<PreTokenizerRule> rules = {
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano"},
       {kLlama3Regex}, true, true},
      {{"dbrx", "smaug-bpe"}, {kLlama3Regex}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
        "mellum", "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling"},
       {kGpt2Regex}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
        "mellum2"},
       {"\\p{N}", kGpt2Regex}},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open"},
       {kQwen2Regex}},
      {{"qwen35"}, {kQwen35Regex}},
      // "default", and a file without tokenizer.ggml.pre (llama.cpp warns
      // that generation quality is degraded, and uses these).
      {{"default", ""},
       {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"}},
  };
  return rules;
}

const PreTokenizerRule* find_rule(const std::string& pre) {
  for (const auto& r : pre_tokenizer_rules()) {
    for (const char* n : r.names) {
      if (pre == n) return &r;
    }
  }
  return nullptr;
}

std::string supported_pre_names() {
  std::string s;
  for (const auto& r : pre_tokenizer_rules()) {
    for (const char* n : r.names) {
      if (*n) s += (s.empty() ? "" : ", ") + std::string(n);
    }
  }
  return s;
}

nlohmann::json splits_then_byte_level(const std::vector<const char*>& regexes) {
  nlohmann::json steps = nlohmann::json::array();
  for (const char* re : regexes) {
    steps.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", re}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
  }
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

// Token texts that end generation besides the EOS/EOT/EOM ids (llama.cpp
// marks them by text when the file names no id for them).
constexpr std::array<const char*, 12> kEndOfGenerationTexts = {
    "<|eot_id|>",    "<|eom_id|>",      "<|im_end|>", "<|end|>",           "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "<EOT>",      "<end_of_utterance>", "<eos>",
    "<turn|>",       "<|tool_response>"};

// Special ids as llama.cpp resolves them: the tokenizer model's default,
// then the file's key when it lies inside the vocabulary (a key outside it
// keeps the default, with a warning; a default outside it is no id).
struct Specials {
  int32_t bos = -1, eos = -1, unk = -1;
};

struct Common {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // one per token; 0 (undefined) where the file has none
  Specials ids;
  std::vector<int32_t> eog;    // ends generation: eos first
  std::optional<bool> add_bos, add_eos;
};

std::vector<std::string> read_tokens(const GgufFile& f) {
  const auto* toks = f.get_array("tokenizer.ggml.tokens", GgufType::String);
  if (!toks || toks->empty()) {
    fail<FormatError>("GGUF file '{}' has no tokenizer (tokenizer.ggml.tokens is missing or "
                      "empty); give a tokenizer file instead", f.path());
  }
  std::vector<std::string> tokens;
  tokens.reserve(toks->size());
  for (auto& t : *toks) {
    // llama.cpp names an empty token after its id.
    tokens.push_back(t.s.empty() ? "[EMPTY_" + std::to_string(tokens.size()) + "]" : t.s);
  }
  return tokens;
}

std::vector<int32_t> read_types(const GgufFile& f, size_t n) {
  std::vector<int32_t> types(n, 0);
  const auto* tt = f.get_array("tokenizer.ggml.token_type");
  if (!tt) return types;
  if (tt->size() < n) {
    fail<FormatError>("GGUF file '{}': tokenizer.ggml.token_type has {} entries for {} tokens",
                      f.path(), tt->size(), n);
  }
  for (size_t i = 0; i < n; ++i) {
    const GgufValue& v = (*tt)[i];
    if (!v.is_integer()) {
      fail<FormatError>("GGUF file '{}': tokenizer.ggml.token_type holds {}", f.path(),
                        v.describe());
    }
    const int64_t x = v.i != 0 ? v.i : int64_t(v.u);
    types[i] = x >= 1 && x <= 6 ? int32_t(x) : 0;  // anything else: undefined, as llama.cpp
  }
  return types;
}

int32_t special_id(const GgufFile& f, const char* key, int32_t fallback, size_t n) {
  if (fallback >= int64_t(n)) fallback = -1;
  const auto v = f.get_int(key);
  if (!v) return fallback;
  if (*v < 0 || *v >= int64_t(n)) {
    fmt::print(stderr,
               "warning: GGUF file '{}': {} = {} is outside the vocabulary of {} tokens; using {} "
               "(the tokenizer model's default)\n",
               f.path(), key, *v, n, fallback);
    return fallback;
  }
  return int32_t(*v);
}

Common read_common(const GgufFile& f, const Specials& defaults) {
  Common c;
  c.tokens = read_tokens(f);
  const size_t n = c.tokens.size();
  c.types = read_types(f, n);
  c.ids.bos = special_id(f, "tokenizer.ggml.bos_token_id", defaults.bos, n);
  c.ids.eos = special_id(f, "tokenizer.ggml.eos_token_id", defaults.eos, n);
  c.ids.unk = special_id(f, "tokenizer.ggml.unknown_token_id", defaults.unk, n);
  auto add_eog = [&](int32_t id) {
    if (id >= 0 && std::find(c.eog.begin(), c.eog.end(), id) == c.eog.end()) c.eog.push_back(id);
  };
  add_eog(c.ids.eos);
  for (const char* k : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    add_eog(special_id(f, k, -1, n));
  }
  for (size_t i = 0; i < n; ++i) {
    for (const char* t : kEndOfGenerationTexts) {
      if (c.tokens[i] == t) add_eog(int32_t(i));
    }
  }
  c.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  c.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
  return c;
}

std::vector<float> read_scores(const GgufFile& f, size_t n) {
  const auto* sc = f.get_array("tokenizer.ggml.scores");
  if (!sc) return std::vector<float>(n, 0.0f);
  if (sc->size() < n) {
    fail<FormatError>("GGUF file '{}': tokenizer.ggml.scores has {} entries for {} tokens",
                      f.path(), sc->size(), n);
  }
  std::vector<float> scores(n);
  for (size_t i = 0; i < n; ++i) {
    const GgufValue& v = (*sc)[i];
    if (v.type == GgufType::F32 || v.type == GgufType::F64) {
      scores[i] = float(v.f);
    } else if (v.is_integer()) {
      scores[i] = float(v.i != 0 ? v.i : int64_t(v.u));  // llama.cpp accepts INT32 scores
    } else {
      fail<FormatError>("GGUF file '{}': tokenizer.ggml.scores holds {}", f.path(), v.describe());
    }
  }
  return scores;
}

std::unique_ptr<Tokenizer> spm_tokenizer(const GgufFile& f) {
  Common c = read_common(f, {/*bos=*/1, /*eos=*/2, /*unk=*/0});
  SentencePieceTokenizer::Spec s;
  s.source = "GGUF file '" + f.path() + "'";
  const size_t n = c.tokens.size();
  s.scores = read_scores(f, n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = c.types[i];
    s.types.push_back(t == 0 ? PieceType::Normal : PieceType(t));
  }
  s.pieces = std::move(c.tokens);
  s.bos = c.ids.bos;
  s.unk = c.ids.unk;
  s.eos = std::move(c.eog);
  s.add_bos = c.add_bos.value_or(true);
  s.add_eos = c.add_eos.value_or(false);
  s.add_dummy_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  s.remove_extra_whitespaces =
      f.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
  s.user_defined_in_raw_text = true;
  return std::make_unique<SentencePieceTokenizer>(std::move(s));
}

// byte_level: the merges are written in GPT-2's printable byte alphabet
// ("gpt2"); otherwise as raw text ("gemma4").
std::vector<BpeModel::Merge> read_merges(const GgufFile& f, bool byte_level) {
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
    auto side = [&](std::string_view s) {
      return byte_level ? byte_level_decode(s).value_or(std::string(s)) : std::string(s);
    };
    merges.emplace_back(side(std::string_view(m.s).substr(0, sp)),
                        side(std::string_view(m.s).substr(sp + 1)));
  }
  return merges;
}

std::unique_ptr<Tokenizer> bpe_tokenizer(const GgufFile& f) {
  HfTokenizer::Parts p;
  p.source = "GGUF file '" + f.path() + "'";
  p.kind = "gguf-gpt2";
  const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("");
  const PreTokenizerRule* rule = find_rule(pre);
  if (!rule) {
    fail<ConfigError>("GGUF file '{}': tokenizer.ggml.pre '{}' is not supported (supported: {}); "
                      "give the model's tokenizer.json instead", f.path(), pre,
                      supported_pre_names());
  }
  if (pre.empty()) {
    fmt::print(stderr, "warning: GGUF file '{}' names no tokenizer.ggml.pre; using llama.cpp's "
                       "'default' pre-tokenizer (the model's own may split text differently)\n",
               f.path());
  }
  p.pre_tokenizer = make_pre_tokenizer(splits_then_byte_level(rule->regexes), p.source);
  Common c = read_common(f, {/*bos=*/11, /*eos=*/11, /*unk=*/-1});
  const size_t n = c.tokens.size();
  detail::StringMap<int32_t> vocab;
  vocab.reserve(n);
  p.model_tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = c.types[i];
    const std::string& t = c.tokens[i];
    // User-defined tokens are stored as their text; the others in GPT-2's
    // printable byte alphabet.
    std::string raw = type == 4 ? t : byte_level_decode(t).value_or(t);
    if (type == 2 || type == 3 || type == 4) {
      p.added.push_back({t, int32_t(i), /*special=*/type != 4});
    }
    vocab.emplace(raw, int32_t(i));
    p.model_tokens[i] = std::move(raw);
  }
  BpeModel::Options opts;
  opts.byte_level = true;
  opts.ignore_merges = rule->ignore_merges;
  p.model = std::make_unique<BpeModel>(opts, std::move(vocab), read_merges(f, true), p.source);
  p.bos = c.ids.bos;
  // llama.cpp decodes a token by its type: only a control-typed BOS is empty
  // (the "gpt2" model's default BOS 11 is "," in GPT-2-style vocabularies).
  p.bos_decodes_empty = c.ids.bos >= 0 && c.types[size_t(c.ids.bos)] == 3;
  p.eos = c.eog;
  if (c.add_bos.value_or(rule->add_bos) && c.ids.bos >= 0) p.prefix.push_back(c.ids.bos);
  if (c.add_eos.value_or(false) && c.ids.eos >= 0) p.suffix.push_back(c.ids.eos);
  return std::make_unique<HfTokenizer>(std::move(p));
}

// "gemma4": SentencePiece-style BPE by merge rank over raw UTF-8 — spaces
// normalized to '▁', text split into runs of newlines and the lines between
// them, unknown characters as <0xNN> byte tokens — with control and
// user-defined tokens matched in the raw text. BOS is always added (llama.cpp
// overrides add_bos_token for Gemma 4).
std::unique_ptr<Tokenizer> gemma4_tokenizer(const GgufFile& f) {
  HfTokenizer::Parts p;
  p.source = "GGUF file '" + f.path() + "'";
  p.kind = "gguf-gemma4";
  p.normalizer = make_normalizer(
      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}, p.source);
  p.pre_tokenizer = make_pre_tokenizer({{"type", "Split"},
                                        {"pattern", {{"Regex", "[^\\n]+|[\\n]+"}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       p.source);
  Common c = read_common(f, {/*bos=*/-1, /*eos=*/-1, /*unk=*/-1});
  const size_t n = c.tokens.size();
  detail::StringMap<int32_t> vocab;
  vocab.reserve(n);
  p.model_tokens = c.tokens;
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = c.types[i];
    if (type == 2 || type == 3 || type == 4) {
      p.added.push_back({c.tokens[i], int32_t(i), /*special=*/type != 4});
    }
    vocab.emplace(c.tokens[i], int32_t(i));
  }
  BpeModel::Options opts;
  opts.byte_fallback = true;
  opts.unk_id = c.ids.unk;
  p.model = std::make_unique<BpeModel>(opts, std::move(vocab), read_merges(f, false), p.source);
  p.replacements = {{"\u2581", " "}};
  p.decode_byte_fallback = true;
  p.bos = c.ids.bos;
  p.eos = c.eog;
  if (c.ids.bos >= 0) p.prefix.push_back(c.ids.bos);
  if (c.add_eos.value_or(false) && c.ids.eos >= 0) p.suffix.push_back(c.ids.eos);
  return std::make_unique<HfTokenizer>(std::move(p));
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model").value_or("");
  if (model.empty()) {
    fail<FormatError>("GGUF file '{}' has no tokenizer (tokenizer.ggml.model is missing); give "
                      "a tokenizer file instead", f.path());
  }
  if (model == "llama") return spm_tokenizer(f);
  if (model == "gpt2") return bpe_tokenizer(f);
  if (model == "gemma4") return gemma4_tokenizer(f);
  fail<ConfigError>("GGUF file '{}': tokenizer.ggml.model '{}' is not supported (supported: "
                    "llama, gpt2, gemma4)", f.path(), model);
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  return load_gguf_tokenizer(GgufFile(path, GgufRead::MetadataOnly));
}

}  // namespace mtp::io
