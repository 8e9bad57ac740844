#include "tokenizer/tokenizer_hf.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer_internal.h"

namespace mtp::io {
namespace {

using json = nlohmann::json;

// Words longer than this are not memoised: they are rare, and SentencePiece-
// style models hand us whole paragraphs that would only bloat the cache.
constexpr size_t kMaxCachedWord = 64;


// Largest token id a tokenizer file may use (no vocabulary comes near 16 M):
// the id -> piece tables are sized by the largest id.
constexpr int64_t kMaxTokenId = int64_t(1) << 24;

// A token id from the JSON: an integer in [0, kMaxTokenId). nlohmann's
// get<int>() casts 1e300 or 2^40 without a check (undefined behaviour).
int32_t token_id_field(const json& v, const std::string& source, const char* what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxTokenId) {
    fail<FormatError>("{}: {} must be a token id, got {}", source, what, json_excerpt(v));
  }
  return int32_t(v.get<int64_t>());
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size()))
    s.replace(i, from.size(), to);
  return s;
}

}  // namespace

// ---------------------------------------------------------------- tokenizer

HfTokenizer::HfTokenizer(Parts parts) : p_(std::move(parts)) {
  std::vector<AddedTokenMatcher::Token> raw, norm;
  size_t n = p_.model_tokens.size();
  for (const auto& a : p_.added) {
    (a.normalized ? norm : raw).push_back({a.content, a.id, a.lstrip, a.rstrip, a.single_word});
    n = std::max(n, size_t(a.id) + 1);
  }
  raw_added_ = std::make_unique<AddedTokenMatcher>(std::move(raw));
  normalized_added_ = std::make_unique<AddedTokenMatcher>(std::move(norm));

  const bool byte_level = p_.model->options().byte_level;
  // Ids no vocab entry and no added token names decode as U+FFFD.
  bytes_.assign(n, std::string(kNoPiece));
  const bool all_present = p_.model_present.size() != p_.model_tokens.size();
  for (size_t id = 0; id < p_.model_tokens.size(); ++id) {
    if (!all_present && !p_.model_present[id]) continue;
    const std::string& t = p_.model_tokens[id];
    const int b = p_.decode_byte_fallback ? detail::parse_byte_piece(t) : -1;
    if (b >= 0) {
      bytes_[id] = std::string(1, char(b));
    } else if (byte_level) {
      bytes_[id] = t;  // already raw bytes
    } else {
      std::string s = t;
      for (const auto& [from, to] : p_.replacements) s = replace_all(std::move(s), from, to);
      bytes_[id] = std::move(s);
    }
  }
  // Added tokens pass through the decoder like HF does (ByteLevel keeps a
  // token whose characters are outside its table as-is).
  for (const auto& a : p_.added) {
    std::string s = a.content;
    if (byte_level) {
      s = byte_level_decode(s).value_or(s);
    } else {
      for (const auto& [from, to] : p_.replacements) s = replace_all(std::move(s), from, to);
    }
    bytes_[size_t(a.id)] = std::move(s);
  }
  if (p_.bos_decodes_empty && p_.bos >= 0 && size_t(p_.bos) < bytes_.size())
    bytes_[size_t(p_.bos)].clear();
}

int32_t HfTokenizer::token_id(std::string_view text) const { return resolve_token(p_, text); }

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special) const {
  detail::require_valid_utf8(text);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special) out.insert(out.end(), p_.prefix.begin(), p_.prefix.end());
  Cache cache;
  raw_added_->encode_around(text, out, [&](std::string_view run, bool at_start) {
    encode_segment(run, at_start, cache, out);
  });
  if (add_special) out.insert(out.end(), p_.suffix.begin(), p_.suffix.end());
  return out;
}

void HfTokenizer::encode_segment(std::string_view text, bool first, Cache& cache,
                                 std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string norm = p_.normalizer ? p_.normalizer->apply(text) : std::string(text);
  if (normalized_added_->empty()) {
    encode_normalized(std::move(norm), first, cache, out);
    return;
  }
  normalized_added_->encode_around(norm, out, [&](std::string_view run, bool at_start) {
    encode_normalized(std::string(run), first && at_start, cache, out);
  });
}

void HfTokenizer::encode_normalized(std::string text, bool first, Cache& cache,
                                    std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<Piece> pieces;
  pieces.push_back({std::move(text), first});
  if (p_.pre_tokenizer) p_.pre_tokenizer->apply(pieces);
  for (const auto& piece : pieces) {
    if (piece.text.size() > kMaxCachedWord) {
      p_.model->encode_word(piece.text, out);
      continue;
    }
    auto it = cache.find(piece.text);
    if (it == cache.end()) {
      std::vector<int32_t> ids;
      p_.model->encode_word(piece.text, ids);
      it = cache.emplace(piece.text, std::move(ids)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

std::string HfTokenizer::token_bytes(int32_t id, int32_t prev) const {
  if (id < 0 || id >= vocab_size()) return std::string(kNoPiece);
  const std::string& b = bytes_[size_t(id)];
  if (p_.strip_leading_space && (prev < 0 || prev == p_.bos) && !b.empty() && b[0] == ' ')
    return b.substr(1);
  return b;
}

// ---------------------------------------------------------------- tokenizer.json

namespace {

struct Loader {
  std::string source;
  HfTokenizer::Parts& parts;

  void decoder(const json& d) {
    if (d.is_null()) return;
    const std::string type = d.at("type").get<std::string>();
    if (type == "Sequence") {
      for (const auto& s : d.at("decoders")) decoder(s);
    } else if (type == "ByteLevel" || type == "Fuse") {
      // ByteLevel: model strings are stored as raw bytes already.
    } else if (type == "ByteFallback") {
      parts.decode_byte_fallback = true;
    } else if (type == "Replace") {
      const json& pat = d.at("pattern");
      if (!pat.contains("String"))
        fail<ConfigError>("{}: Replace decoder with a regex pattern is not supported", source);
      parts.replacements.emplace_back(pat["String"].get<std::string>(),
                                      d.at("content").get<std::string>());
    } else if (type == "Strip") {
      // Only leading-space stripping of the whole sequence is meaningful per token.
      const json start = d.value("start", json(0));
      if (!start.is_number_integer())
        fail<FormatError>("{}: Strip decoder \"start\" must be an integer, got {}", source,
                          json_excerpt(start));
      if (start.get<int64_t>() > 0 && d.value("content", std::string(" ")) == " ")
        parts.strip_leading_space = true;
    } else if (type == "Metaspace") {
      const std::string repl = d.value("replacement", std::string("\xE2\x96\x81"));
      parts.replacements.emplace_back(repl, " ");
      const std::string scheme = d.value(
          "prepend_scheme", std::string(d.value("add_prefix_space", true) ? "always" : "never"));
      if (scheme != "never") parts.strip_leading_space = true;
    } else {
      fail<ConfigError>("{}: decoder type '{}' is not supported", source, type);
    }
  }

  // Ids of the post-processor, split around the sequence ($A).
  void post_processor(const json& pp) {
    if (pp.is_null()) return;
    const std::string type = pp.at("type").get<std::string>();
    if (type == "ByteLevel") return;
    if (type == "Sequence") {
      for (const auto& s : pp.at("processors")) post_processor(s);
      return;
    }
    if (type == "TemplateProcessing") {
      const json& specials = pp.at("special_tokens");
      bool after = false;
      for (const auto& item : pp.at("single")) {
        if (item.contains("Sequence")) {
          after = true;
        } else if (item.contains("SpecialToken")) {
          const std::string name = item["SpecialToken"].at("id").get<std::string>();
          if (!specials.contains(name))
            fail<FormatError>("{}: template names unknown special token '{}'", source, name);
          for (const auto& id : specials[name].at("ids"))
            (after ? parts.suffix : parts.prefix)
                .push_back(token_id_field(id, source, "a template special token id"));
        }
      }
      return;
    }
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      parts.prefix.push_back(token_id_field(pp.at("cls").at(1), source, "cls id"));
      parts.suffix.push_back(token_id_field(pp.at("sep").at(1), source, "sep id"));
      return;
    }
    fail<ConfigError>("{}: post_processor type '{}' is not supported", source, type);
  }
};

// A merge is "a b" (older files) or ["a", "b"].
BpeModel::Merge parse_merge(const json& m, const std::string& source, size_t rank) {
  if (m.is_array() && m.size() == 2) return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos)
      return {s.substr(0, sp), s.substr(sp + 1)};
  }
  fail<FormatError>("{}: merge #{} is malformed: {}", source, rank, json_excerpt(m));
}

HfTokenizer::Parts parse_tokenizer_json(const json& j, const std::string& source) {
  HfTokenizer::Parts parts;
  parts.source = source;
  parts.kind = "hf-bpe";
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    fail<FormatError>("{}: not a tokenizer.json (no \"model\" object)", source);
  }
  const json& model = j["model"];
  const std::string mtype =
      model.value("type", std::string(model.contains("merges") ? "BPE" : "?"));
  if (mtype != "BPE")
    fail<ConfigError>("{}: tokenizer model type '{}' is not supported (only BPE)", source, mtype);
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0) {
    fail<ConfigError>("{}: BPE dropout is not supported", source);
  }
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(k) && model[k].is_string() && !model[k].get<std::string>().empty()) {
      fail<ConfigError>("{}: BPE {} is not supported", source, k);
    }
  }

  parts.normalizer = make_normalizer(j.value("normalizer", json()), source);
  parts.pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", json()), source);
  const json dec = j.value("decoder", json());
  const bool byte_level = (parts.pre_tokenizer && parts.pre_tokenizer->byte_level()) ||
                          (dec.is_object() && dec.value("type", std::string()) == "ByteLevel");

  // Vocabulary, converted to model space (raw bytes for byte-level models).
  auto to_model = [&](const std::string& s) {
    return byte_level ? byte_level_decode(s).value_or(s) : s;
  };
  detail::StringMap<int32_t> vocab;
  const json& v = model.at("vocab");
  if (!v.is_object()) fail<FormatError>("{}: model.vocab must be an object", source);
  vocab.reserve(v.size());
  std::vector<std::string> names;  // id -> vocab key, for duplicate messages
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_number_integer())
      fail<FormatError>("{}: token '{}' has id {}, not an integer", source,
                        clip_value(it.key()), json_excerpt(it.value()));
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxTokenId)
      fail<FormatError>("{}: token '{}' has id {}", source, it.key(), id);
    std::string key = to_model(it.key());
    if (size_t(id) >= parts.model_tokens.size()) {
      parts.model_tokens.resize(size_t(id) + 1);
      parts.model_present.resize(size_t(id) + 1, 0);
      names.resize(size_t(id) + 1);
    }
    if (parts.model_present[size_t(id)]) {
      fail<FormatError>("{}: id {} is given to two tokens, '{}' and '{}'", source, id,
                        names[size_t(id)], it.key());
    }
    parts.model_present[size_t(id)] = 1;
    names[size_t(id)] = it.key();
    parts.model_tokens[size_t(id)] = key;
    vocab.emplace(std::move(key), int32_t(id));
  }
  std::vector<BpeModel::Merge> merges;
  const json& mj = model.at("merges");
  merges.reserve(mj.size());
  for (size_t r = 0; r < mj.size(); ++r) {
    auto [a, b] = parse_merge(mj[r], source, r);
    merges.emplace_back(to_model(a), to_model(b));
  }
  BpeModel::Options opts;
  opts.byte_level = byte_level;
  opts.byte_fallback = model.value("byte_fallback", false);
  opts.ignore_merges = model.value("ignore_merges", false);
  opts.fuse_unk = model.value("fuse_unk", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab.find(to_model(model["unk_token"].get<std::string>()));
    if (it != vocab.end()) opts.unk_id = it->second;
  }
  parts.model = std::make_unique<BpeModel>(opts, std::move(vocab), merges, source);

  for (const auto& a : j.value("added_tokens", json::array())) {
    HfTokenizer::AddedToken t;
    const json& id = a.at("id");
    t.content = a.at("content").get<std::string>();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxTokenId ||
        t.content.empty())
      fail<FormatError>("{}: added token '{}' has id {}", source, clip_value(t.content),
                        json_excerpt(id));
    t.id = int32_t(id.get<int64_t>());
    for (const auto& o : parts.added) {
      if (o.id == t.id && o.content != t.content)
        fail<FormatError>("{}: id {} is given to two added tokens, '{}' and '{}'", source, t.id,
                          o.content, t.content);
    }
    t.special = a.value("special", false);
    t.normalized = a.value("normalized", !t.special);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    parts.added.push_back(std::move(t));
  }

  Loader ld{source, parts};
  ld.decoder(dec);
  ld.post_processor(j.value("post_processor", json()));
  return parts;
}

}  // namespace

// Token named in tokenizer_config.json -> id (added tokens first, then the
// model vocabulary, whose byte-level strings are stored as raw bytes).
int32_t resolve_token(const HfTokenizer::Parts& p, std::string_view name) {
  for (const auto& a : p.added) {
    if (a.content == name) return a.id;
  }
  if (p.model->options().byte_level) {
    if (auto raw = byte_level_decode(name)) {
      if (int32_t id = p.model->find(*raw); id >= 0) return id;
    }
  }
  return p.model->find(name);
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path) {
  const std::string text = read_file(path);  // IoError when missing
  HfTokenizer::Parts parts;
  try {
    const json j = parse_json(text, "'" + path + "'");
    parts = parse_tokenizer_json(j, path);
  } catch (const json::exception& e) {
    fail<FormatError>("'{}' is not a valid tokenizer.json: {}", path,
                      clip_value(e.what(), 200));
  }

  // BOS: the template's (already in parts.prefix), else the config's.
  const detail::TokenizerConfig cfg = detail::read_tokenizer_config(detail::config_path_for(path));
  if (!parts.prefix.empty()) {
    parts.bos = parts.prefix.front();
  } else {
    if (cfg.bos_token) parts.bos = resolve_token(parts, *cfg.bos_token);
    if (cfg.add_bos_token.value_or(false) && parts.bos >= 0) parts.prefix.push_back(parts.bos);
  }
  if (cfg.eos_token) {
    if (int32_t id = resolve_token(parts, *cfg.eos_token); id >= 0) parts.eos.push_back(id);
  }
  if (parts.suffix.empty() && cfg.add_eos_token.value_or(false) && !parts.eos.empty()) {
    parts.suffix.push_back(parts.eos.front());
  }
  return std::make_unique<HfTokenizer>(std::move(parts));
}

// ---------------------------------------------------------------- GPT-2 files

// GPT-2's original tokenizer files: encoder.json (byte-level token -> id) and
// vocab.bpe ("#version" line, then one "a b" merge per line, by rank). It is
// the byte-level BPE of tokenizer_hf.h with the GPT-2 ByteLevel pre-tokenizer
// (regex 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
// no prefix space) and <|endoftext|> as the one special token, which is both
// BOS and EOS; GPT-2 adds neither when encoding.
std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& encoder_json,
                                               const std::string& vocab_bpe) {
  const std::string enc_text = read_file(encoder_json);  // IoError when missing
  const std::string bpe_text = read_file(vocab_bpe);

  HfTokenizer::Parts parts;
  parts.source = encoder_json;
  parts.kind = "gpt2";
  parts.pre_tokenizer =
      make_byte_level_pre_tokenizer(/*add_prefix_space=*/false, /*use_regex=*/true);

  detail::StringMap<int32_t> vocab;
  try {
    const nlohmann::json j = parse_json(enc_text, "'" + encoder_json + "'");
    if (!j.is_object() || j.empty())
      fail<FormatError>("'{}': expected a JSON object of token ids", encoder_json);
    vocab.reserve(j.size());
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_number_integer())
        fail<FormatError>("'{}': token '{}' has id {}, not an integer", encoder_json,
                          clip_value(it.key()), json_excerpt(it.value()));
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id >= kMaxTokenId)
        fail<FormatError>("'{}': token '{}' has id {}", encoder_json, clip_value(it.key()), id);
      std::string raw = byte_level_decode(it.key()).value_or(it.key());
      if (size_t(id) >= parts.model_tokens.size()) {
        parts.model_tokens.resize(size_t(id) + 1);
        parts.model_present.resize(size_t(id) + 1, 0);
      }
      if (parts.model_present[size_t(id)])
        fail<FormatError>("'{}': id {} is given to two tokens (the second is '{}')",
                          encoder_json, id, clip_value(it.key()));
      parts.model_present[size_t(id)] = 1;
      parts.model_tokens[size_t(id)] = raw;
      vocab.emplace(std::move(raw), int32_t(id));
    }
  } catch (const nlohmann::json::exception& e) {
    fail<FormatError>("'{}' is not a valid GPT-2 encoder.json: {}", encoder_json,
                      clip_value(e.what(), 200));
  }

  std::vector<BpeModel::Merge> merges;
  size_t line_no = 0;
  for (size_t pos = 0; pos < bpe_text.size();) {
    size_t eol = bpe_text.find('\n', pos);
    if (eol == std::string::npos) eol = bpe_text.size();
    std::string_view line(bpe_text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos) {
      fail<FormatError>("'{}' line {}: expected \"a b\", got '{}'", vocab_bpe, line_no,
                        line.substr(0, 80));
    }
    auto side = [](std::string_view s) { return byte_level_decode(s).value_or(std::string(s)); };
    merges.emplace_back(side(line.substr(0, sp)), side(line.substr(sp + 1)));
  }

  BpeModel::Options opts;
  opts.byte_level = true;
  parts.model = std::make_unique<BpeModel>(opts, std::move(vocab), merges, vocab_bpe);

  const int32_t eot = parts.model->find("<|endoftext|>");
  if (eot < 0) fail<FormatError>("'{}' has no <|endoftext|> token", encoder_json);
  parts.added.push_back({"<|endoftext|>", eot, /*special=*/true});
  parts.bos = eot;
  parts.eos = {eot};
  return std::make_unique<HfTokenizer>(std::move(parts));
}

}  // namespace mtp::io
