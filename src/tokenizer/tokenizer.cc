// Format-independent tokenizer pieces: tokenizer_config.json reading and the
// load_tokenizer factory (UTF-8 rules: io/utf8.h).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/setting.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer_gguf.h"
#include "tokenizer/tokenizer_hf.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/tokenizer_llama2c.h"
#include "tokenizer/tokenizer_sentencepiece.h"

namespace fs = std::filesystem;

namespace mtp::io {

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  int32_t prev = -1;
  for (int32_t id : ids) {
    bytes += token_bytes(id, prev);
    prev = id;
  }
  return sanitize_utf8(bytes);
}

void check_tokenizer_covers(int64_t model_vocab, const Tokenizer& tok,
                            const std::string& tokenizer_path, std::FILE* warn) {
  const int64_t n = tok.vocab_size();
  if (n > model_vocab) {
    fail<ConfigError>("tokenizer '{}' has {} tokens but the model's vocabulary is {}: ids {}..{} "
                      "have no embedding row (wrong tokenizer for this model?)", tokenizer_path,
                      n, model_vocab, model_vocab, n - 1);
  }
  // n < 0.9 * model_vocab, in integers.
  if (10 * n < 9 * model_vocab) {
    fail<ConfigError>("tokenizer '{}' has {} tokens but the model's vocabulary is {}: it covers "
                      "less than 90 % of it (wrong tokenizer for this model?)", tokenizer_path,
                      n, model_vocab);
  }
  if (n < model_vocab && warn) {
    fmt::print(warn, "warning: tokenizer '{}' has {} tokens, the model's vocabulary is {}; ids "
                     "{}..{} have no piece and decode as U+FFFD\n", tokenizer_path, n,
               model_vocab, n, model_vocab - 1);
    std::fflush(warn);
  }
}

namespace detail {

size_t utf8_len_at(std::string_view s, size_t i) {
  const Scan sc = scan_utf8(s, i);
  return sc.complete ? sc.len : 0;
}

uint32_t next_codepoint(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t j = 1; j < n && i + j < s.size(); ++j) cp = (cp << 6) | (uint8_t(s[i + j]) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

void require_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const Scan sc = scan_utf8(text, i);
    if (!sc.complete) {
      std::string hex;
      for (size_t j = i; j < i + sc.len; ++j) hex += fmt::format("{:02X}", uint8_t(text[j]));
      fail<InputError>("input is not valid UTF-8: byte 0x{} at offset {}", hex, i);
    }
    i += sc.len;
  }
}

int parse_byte_piece(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  int v = 0;
  for (size_t k = 3; k < 5; ++k) {
    const char c = p[k];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  return v;
}

std::string config_path_for(const std::string& file) {
  const fs::path p(file);
  const std::string name = p.filename().string();
  for (std::string_view suffix : {"tokenizer.json", "tokenizer.model"}) {
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      fs::path cand =
          p.parent_path() / (name.substr(0, name.size() - suffix.size()) + "tokenizer_config.json");
      if (fs::exists(cand)) return cand.string();
    }
  }
  fs::path cand = p.parent_path() / "tokenizer_config.json";
  return fs::exists(cand) ? cand.string() : std::string();
}

TokenizerConfig read_tokenizer_config(const std::string& path) {
  TokenizerConfig cfg;
  if (path.empty()) return cfg;
  const nlohmann::json j = parse_json(read_file(path), "'" + path + "'");
  if (!j.is_object()) fail<FormatError>("'{}': expected a JSON object", path);
  cfg.present = true;
  auto flag = [&](const char* key) -> std::optional<bool> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) fail<FormatError>("'{}': \"{}\" must be true or false", path, key);
    return it->get<bool>();
  };
  auto token = [&](const char* key) -> std::optional<std::string> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      return (*it)["content"].get<std::string>();
    }
    fail<FormatError>("'{}': \"{}\" must be a string or {{\"content\": ...}}", path, key);
  };
  cfg.add_bos_token = flag("add_bos_token");
  cfg.add_eos_token = flag("add_eos_token");
  cfg.bos_token = token("bos_token");
  cfg.eos_token = token("eos_token");
  return cfg;
}

}  // namespace detail

namespace {

bool ends_with(const std::string& s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// GPT-2 pair: "<prefix>encoder.json" + "<prefix>vocab.bpe" (else vocab.bpe).
std::unique_ptr<Tokenizer> load_gpt2_pair(const fs::path& encoder) {
  const std::string name = encoder.filename().string();
  fs::path bpe = encoder.parent_path() / (name.substr(0, name.size() - 12) + "vocab.bpe");
  if (!fs::exists(bpe)) bpe = encoder.parent_path() / "vocab.bpe";
  if (!fs::exists(bpe)) {
    fail<IoError>("GPT-2 tokenizer '{}': vocab.bpe not found beside it (looked for '{}')",
                  encoder.string(), bpe.string());
  }
  return load_gpt2_tokenizer(encoder.string(), bpe.string());
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) fail<IoError>("tokenizer '{}' does not exist", path);
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "tokenizer.json")) return load_hf_tokenizer((p / "tokenizer.json").string());
    if (fs::exists(p / "tokenizer.model"))
      return load_sentencepiece_tokenizer((p / "tokenizer.model").string());
    if (fs::exists(p / "tokenizer.bin"))
      return load_llama2c_tokenizer((p / "tokenizer.bin").string());
    // llama2.c checkpoints ship tokenizers such as tok512.bin; take the first by name.
    std::vector<fs::path> bins;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("tok", 0) == 0 && ends_with(n, ".bin")) bins.push_back(e.path());
    }
    if (!bins.empty()) {
      std::sort(bins.begin(), bins.end());
      return load_llama2c_tokenizer(bins.front().string());
    }
    if (fs::exists(p / "encoder.json")) return load_gpt2_pair(p / "encoder.json");
    fail<IoError>(
        "no tokenizer in directory '{}' (looked for tokenizer.json, tokenizer.model, "
        "tokenizer.bin, "
        "tok*.bin, encoder.json)",
        path);
  }
  const std::string name = p.filename().string();
  // A GGUF file (by its magic, whatever its name): tokenizer.ggml.* inside.
  if (GgufFile::has_magic(path)) return load_gguf_tokenizer(path);
  if (ends_with(name, "encoder.json")) return load_gpt2_pair(p);
  if (ends_with(name, ".json")) return load_hf_tokenizer(path);
  if (ends_with(name, ".model")) return load_sentencepiece_tokenizer(path);
  if (ends_with(name, ".bin")) return load_llama2c_tokenizer(path);
  fail<FormatError>(
      "tokenizer '{}': unrecognised file type (expected tokenizer.json, a SentencePiece .model, "
      "a llama2.c .bin, a GPT-2 encoder.json or a GGUF file)",
      path);
}

size_t max_prompt_bytes(const Tokenizer& tok, int64_t ctx) {
  size_t longest = 1;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    longest = std::max(longest, tok.token_bytes(id, -1).size());
  }
  const uint64_t bound = uint64_t(std::max<int64_t>(ctx, 1)) * longest * 4;
  return size_t(std::min<uint64_t>(bound, uint64_t(1) << 40));
}

void check_prompt_bytes(size_t bytes, size_t max_bytes, int64_t ctx, const std::string& what) {
  if (bytes <= max_bytes) return;
  fail_setting<InputError>("ctx", "{} is {} bytes; a context of {} tokens holds at most {} bytes "
                           "of text with this tokenizer, so it cannot fit: shorten it or raise "
                           "the context", what, bytes, ctx, max_bytes);
}

}  // namespace mtp::io
