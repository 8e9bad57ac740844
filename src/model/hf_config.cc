#include "model/hf_config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::model {

namespace {

// transformers' per-family defaults for the keys real checkpoints omit.
struct Defaults {
  int max_position;
  double rope_theta;
  bool tie;
  int bos, eos;  // -1 = None
};

Defaults family_defaults(Arch a) {
  switch (a) {
    case Arch::Llama: return {2048, 10000.0, false, 1, 2};
    case Arch::Qwen2: return {32768, 10000.0, false, -1, -1};
    case Arch::Qwen3: return {32768, 10000.0, false, -1, -1};
    case Arch::Gemma2: return {8192, 10000.0, true, 2, 1};
    case Arch::Gemma3: return {131072, 1000000.0, true, 2, 1};
  }
  return {};
}

// No released checkpoint has more than a few hundred layers.
constexpr int kMaxLayers = 1 << 16;

bool is_gemma(Arch a) { return a == Arch::Gemma2 || a == Arch::Gemma3; }

// Typed access to one JSON object with messages naming `where` and the key.
// "has" means present and not null: a null value selects the default, except
// for the keys where None has a meaning, which the caller checks with present().
struct Keys {
  const json& j;
  std::string where;

  bool present(const char* k) const { return j.contains(k); }
  bool has(const char* k) const { return j.contains(k) && !j.at(k).is_null(); }

  [[noreturn]] void type_error(const char* k, const char* want) const {
    fail<ConfigError>("{}: '{}' must be {}, got {}", where, k, want, j.at(k).dump());
  }
  int integer(const char* k) const {
    const json& v = j.at(k);
    if (!v.is_number_integer()) type_error(k, "an integer");
    auto x = v.get<int64_t>();
    if (x < INT_MIN || x > INT_MAX) type_error(k, "a 32-bit integer");
    return int(x);
  }
  int req_int(const char* k) const {
    if (!has(k)) fail<ConfigError>("{}: missing required key '{}'", where, k);
    return integer(k);
  }
  int get_int(const char* k, int def) const { return has(k) ? integer(k) : def; }
  double get_num(const char* k, double def) const {
    if (!has(k)) return def;
    if (!j.at(k).is_number()) type_error(k, "a number");
    return j.at(k).get<double>();
  }
  bool get_bool(const char* k, bool def) const {
    if (!has(k)) return def;
    if (!j.at(k).is_boolean()) type_error(k, "true or false");
    return j.at(k).get<bool>();
  }
  std::string get_str(const char* k, const std::string& def) const {
    if (!has(k)) return def;
    if (!j.at(k).is_string()) type_error(k, "a string");
    return j.at(k).get<std::string>();
  }
};

// rope_scaling (transformers 4.x) or one entry of rope_parameters (5.x).
RopeScaling parse_rope_scaling(const json& rs, const std::string& where) {
  RopeScaling r;
  if (rs.is_null()) return r;
  if (!rs.is_object()) fail<ConfigError>("{}: rope_scaling must be an object or null", where);
  Keys k{rs, where + " rope_scaling"};
  std::string type = k.has("rope_type") ? k.get_str("rope_type", "") : k.get_str("type", "");
  if (type.empty()) fail<ConfigError>("{}: missing key 'rope_type'", k.where);
  auto positive = [&](const char* key) {
    if (!k.has(key)) fail<ConfigError>("{}: missing key '{}' (rope_type '{}')", k.where, key, type);
    double v = k.get_num(key, 0);
    if (!(v > 0)) fail<ConfigError>("{}: '{}' must be positive, got {}", k.where, key, v);
    return v;
  };
  if (type == "default") return r;
  if (type == "linear") {
    r.type = RopeScaling::Type::Linear;
    r.factor = float(positive("factor"));
  } else if (type == "llama3") {
    r.type = RopeScaling::Type::Llama3;
    r.factor = float(positive("factor"));
    r.low_freq_factor = float(positive("low_freq_factor"));
    r.high_freq_factor = float(positive("high_freq_factor"));
    if (!k.has("original_max_position_embeddings")) {
      fail<ConfigError>("{}: missing key 'original_max_position_embeddings' (rope_type 'llama3')",
                        k.where);
    }
    r.original_max_position = k.integer("original_max_position_embeddings");
  } else {
    fail<ConfigError>("{}: unsupported rope_scaling type '{}' (supported: default, linear, llama3)",
                      where, type);
  }
  return r;
}

// eos_token_id: int, list of ints, or null. Returns whether the key was present.
bool collect_ids(const json& j, const char* key, const std::string& where,
                 std::vector<int32_t>& out) {
  if (!j.is_object() || !j.contains(key)) return false;
  const json& v = j.at(key);
  auto one = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) {
      fail<ConfigError>("{}: '{}' must be a token id or a list of them, got {}", where, key,
                        v.dump());
    }
    out.push_back(int32_t(x.get<int64_t>()));
  };
  if (v.is_array()) {
    for (auto& x : v) one(x);
  } else if (!v.is_null()) {
    one(v);
  }
  return true;
}

}  // namespace

ModelConfig parse_hf_config(const json& config, const json* generation_config,
                            const std::string& where) {
  if (!config.is_object()) fail<ConfigError>("{}: not a JSON object", where);
  Keys top{config, where};

  // ---- family
  std::string name;
  if (config.contains("architectures") && config.at("architectures").is_array() &&
      !config.at("architectures").empty() && config.at("architectures")[0].is_string()) {
    name = config.at("architectures")[0].get<std::string>();
  } else if (top.has("model_type")) {
    name = top.get_str("model_type", "");
  } else {
    fail<ConfigError>("{}: neither 'architectures' nor 'model_type' is given", where);
  }
  struct Known {
    const char* name;
    Arch arch;
    bool multimodal;
  };
  static const Known known[] = {
      {"LlamaForCausalLM", Arch::Llama, false},   {"llama", Arch::Llama, false},
      {"Qwen2ForCausalLM", Arch::Qwen2, false},   {"qwen2", Arch::Qwen2, false},
      {"Qwen3ForCausalLM", Arch::Qwen3, false},   {"qwen3", Arch::Qwen3, false},
      {"Gemma2ForCausalLM", Arch::Gemma2, false}, {"gemma2", Arch::Gemma2, false},
      {"Gemma3ForCausalLM", Arch::Gemma3, false}, {"gemma3_text", Arch::Gemma3, false},
      {"Gemma3ForConditionalGeneration", Arch::Gemma3, true}, {"gemma3", Arch::Gemma3, true}};
  const Known* fam = nullptr;
  for (auto& k : known) {
    if (name == k.name) fam = &k;
  }
  if (!fam) {
    fail<ConfigError>("{}: unsupported architecture '{}' (supported: LlamaForCausalLM, "
                      "Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                      "Gemma3ForConditionalGeneration)", where, name);
  }
  const Arch arch = fam->arch;
  const Defaults def = family_defaults(arch);

  // The text model's keys: nested for the multimodal Gemma 3 checkpoint.
  const json* text_json = &config;
  std::string text_where = where;
  if (fam->multimodal) {
    if (!config.contains("text_config") || !config.at("text_config").is_object()) {
      fail<ConfigError>("{}: missing key 'text_config' ({} checkpoint)", where, name);
    }
    text_json = &config.at("text_config");
    text_where = where + " text_config";
  }
  Keys k{*text_json, text_where};

  ModelConfig c;
  c.arch = arch;
  c.source = "hf";
  c.d_model = k.req_int("hidden_size");
  c.ffn = k.req_int("intermediate_size");
  c.n_layers = k.req_int("num_hidden_layers");
  // Per-layer tables (layer_sliding, the loader's tensor list) are sized by
  // this before any tensor is seen: refuse what no checkpoint has (the
  // loader then checks the count against the tensors and the file size).
  if (c.n_layers <= 0 || c.n_layers > kMaxLayers) {
    fail<ConfigError>("{}: num_hidden_layers must be in 1..{}, got {}", text_where, kMaxLayers,
                      c.n_layers);
  }
  if (arch == Arch::Gemma3) {  // Gemma3TextConfig defaults (4B multimodal relies on them)
    c.n_heads = k.get_int("num_attention_heads", 8);
    c.n_kv_heads = k.get_int("num_key_value_heads", 4);
    c.vocab = k.get_int("vocab_size", 262208);
  } else {
    c.n_heads = k.req_int("num_attention_heads");
    c.n_kv_heads = k.get_int("num_key_value_heads", arch == Arch::Gemma2 ? 4 : c.n_heads);
    c.vocab = k.req_int("vocab_size");
  }
  if (c.n_heads <= 0) {
    fail<ConfigError>("{}: num_attention_heads must be positive, got {}", text_where, c.n_heads);
  }
  int head_default = c.d_model / c.n_heads;
  if (arch == Arch::Qwen3) head_default = 128;    // Qwen3Config default
  if (is_gemma(arch)) head_default = 256;         // Gemma2/3 config default
  const bool derived_head = arch != Arch::Qwen3 && !is_gemma(arch);
  if (!k.has("head_dim") && derived_head && c.d_model % c.n_heads != 0) {
    fail<ConfigError>("{}: hidden_size {} is not a multiple of num_attention_heads {} (and no "
                      "head_dim is given)", text_where, c.d_model, c.n_heads);
  }
  c.head_dim = k.get_int("head_dim", head_default);
  c.max_position = k.get_int("max_position_embeddings", def.max_position);
  c.norm_eps = float(k.get_num("rms_norm_eps", 1e-6));
  c.rope_interleaved = false;  // HF rotate-half layout

  // ---- RoPE: rope_theta + rope_scaling (4.x) or rope_parameters (5.x).
  double theta = k.get_num("rope_theta", def.rope_theta);
  RopeScaling scaling;
  double local_theta = arch == Arch::Gemma3 ? k.get_num("rope_local_base_freq", 10000.0) : 0.0;
  if (k.has("rope_parameters") && k.j.at("rope_parameters").is_object()) {
    const json& rp = k.j.at("rope_parameters");
    if (rp.contains("full_attention")) {  // per layer type (Gemma 3)
      Keys full{rp.at("full_attention"), text_where + " rope_parameters.full_attention"};
      theta = full.get_num("rope_theta", theta);
      scaling = parse_rope_scaling(rp.at("full_attention"), full.where);
      if (rp.contains("sliding_attention")) {
        Keys slide{rp.at("sliding_attention"), text_where + " rope_parameters.sliding_attention"};
        local_theta = slide.get_num("rope_theta", local_theta);
        if (parse_rope_scaling(rp.at("sliding_attention"), slide.where).type !=
            RopeScaling::Type::None) {
          fail<ConfigError>("{}: rope scaling on sliding layers is not supported", slide.where);
        }
      }
    } else {
      theta = Keys{rp, text_where + " rope_parameters"}.get_num("rope_theta", theta);
      scaling = parse_rope_scaling(rp, text_where + " rope_parameters");
    }
  } else if (k.present("rope_scaling")) {
    scaling = parse_rope_scaling(k.j.at("rope_scaling"), text_where);
  }
  c.rope_theta = float(theta);
  c.rope_scaling = scaling;
  c.rope_local_theta = float(local_theta);
  if (arch == Arch::Gemma2 && scaling.type != RopeScaling::Type::None) {
    // Gemma 2 scales every layer's RoPE, sliding ones included; ModelConfig
    // applies scaling to global layers only.
    fail<ConfigError>("{}: rope_scaling on Gemma 2 is not supported", text_where);
  }

  // ---- features that would silently change the computation
  if (arch != Arch::Qwen2 && k.get_bool("attention_bias", false)) {
    fail<ConfigError>("{}: attention_bias=true is not supported for {}", text_where, name);
  }
  if (k.get_bool("mlp_bias", false)) {
    fail<ConfigError>("{}: mlp_bias=true is not supported for {}", text_where, name);
  }
  if ((arch == Arch::Qwen2 || arch == Arch::Qwen3) && k.get_bool("use_sliding_window", false)) {
    fail<ConfigError>("{}: use_sliding_window=true (Qwen sliding-window attention) is not "
                      "supported", text_where);
  }
  if (is_gemma(arch)) {
    // Gemma's MLP reads hidden_activation; hidden_act is ignored by transformers.
    std::string act = k.get_str("hidden_activation", "gelu_pytorch_tanh");
    if (act != "gelu_pytorch_tanh" && act != "gelu_new") {
      fail<ConfigError>("{}: unsupported hidden_activation '{}' (supported: gelu_pytorch_tanh)",
                        text_where, act);
    }
    c.activation = Activation::GeluTanh;
  } else {
    std::string act = k.get_str("hidden_act", "silu");
    if (act != "silu" && act != "swish") {
      fail<ConfigError>("{}: unsupported hidden_act '{}' (supported: silu)", text_where, act);
    }
    c.activation = Activation::SiLU;
  }
  c.qkv_bias = arch == Arch::Qwen2;  // Qwen2 always has q/k/v biases, never o
  c.qk_norm = arch == Arch::Qwen3 || arch == Arch::Gemma3;

  // ---- Gemma specifics
  if (is_gemma(arch)) {
    c.norm_one_plus = true;
    c.sandwich_norms = true;
    c.embed_scale = std::sqrt(float(c.d_model));  // fp32, docs/SEMANTICS.md
    double qpas = k.get_num("query_pre_attn_scalar", 256.0);
    if (!(qpas > 0)) fail<ConfigError>("{}: query_pre_attn_scalar must be positive", text_where);
    c.query_scale = float(std::pow(qpas, -0.5));  // Python: scalar ** -0.5 in double
    // Absent -> the family default; null -> no softcap (transformers' None).
    auto softcap = [&](const char* key, double dflt) {
      if (!k.present(key)) return float(dflt);
      if (!k.has(key)) return 0.f;
      double v = k.get_num(key, 0);
      if (!(v > 0)) fail<ConfigError>("{}: '{}' must be positive or null", text_where, key);
      return float(v);
    };
    bool g2 = arch == Arch::Gemma2;
    c.attn_softcap = softcap("attn_logit_softcapping", g2 ? 50.0 : 0.0);
    c.final_softcap = softcap("final_logit_softcapping", g2 ? 30.0 : 0.0);

    int window = k.present("sliding_window") ? k.get_int("sliding_window", 0) : 4096;
    if (window < 0) fail<ConfigError>("{}: sliding_window must be positive", text_where);
    c.layer_sliding.assign(c.n_layers, 0);
    if (k.has("layer_types")) {
      const json& lt = k.j.at("layer_types");
      if (!lt.is_array() || int(lt.size()) != c.n_layers) {
        fail<ConfigError>("{}: layer_types must list {} entries", text_where, c.n_layers);
      }
      for (int i = 0; i < c.n_layers; ++i) {
        std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
        if (t == "sliding_attention") c.layer_sliding[i] = 1;
        else if (t != "full_attention") {
          fail<ConfigError>("{}: unsupported layer type '{}' (supported: sliding_attention, "
                            "full_attention)", text_where, t);
        }
      }
    } else if (g2) {
      for (int i = 0; i < c.n_layers; ++i) c.layer_sliding[i] = i % 2 == 0;  // even = local
    } else {
      int pattern = k.get_int("sliding_window_pattern", 6);
      if (pattern <= 0) fail<ConfigError>("{}: sliding_window_pattern must be positive", text_where);
      for (int i = 0; i < c.n_layers; ++i) c.layer_sliding[i] = (i + 1) % pattern != 0;
    }
    // sliding_window: null leaves "sliding" layers unwindowed (they keep the
    // local RoPE base in Gemma 3); a window spanning the whole context is that.
    c.sliding_window = window > 0 ? window : c.max_position;
  } else {
    // Llama/Qwen: every layer global (Qwen's sliding_window is inert unless
    // use_sliding_window, refused above).
    if (k.has("layer_types")) {
      for (auto& t : k.j.at("layer_types")) {
        if (t != "full_attention") {
          fail<ConfigError>("{}: unsupported layer type {} for {}", text_where, t.dump(), name);
        }
      }
    }
  }

  // ---- embeddings tie, special tokens
  if (k.has("tie_word_embeddings")) {
    c.tie_embeddings = k.get_bool("tie_word_embeddings", def.tie);
  } else {
    c.tie_embeddings = top.get_bool("tie_word_embeddings", def.tie);
  }
  std::vector<int32_t> eos;
  bool in_config = collect_ids(config, "eos_token_id", where, eos);
  if (fam->multimodal) in_config |= collect_ids(*text_json, "eos_token_id", text_where, eos);
  if (!in_config && def.eos >= 0) eos.push_back(def.eos);
  if (generation_config) {
    collect_ids(*generation_config, "eos_token_id", "generation_config.json", eos);
  }
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  c.eos_ids = eos;
  std::vector<int32_t> bos;
  bool bos_given = (fam->multimodal && collect_ids(*text_json, "bos_token_id", text_where, bos)) ||
                   collect_ids(config, "bos_token_id", where, bos);
  c.bos_id = bos_given ? (bos.empty() ? -1 : bos.front()) : def.bos;

  c.validate(text_where);
  return c;
}

ModelConfig read_hf_config(const std::string& dir) {
  fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::exists(cfg)) fail<IoError>("no config.json in '{}'", dir);
  auto parse = [](const fs::path& p) {
    try {
      return json::parse(read_file(p.string()));
    } catch (const json::exception& e) {
      fail<FormatError>("'{}' is not valid JSON: {}", p.string(), e.what());
    }
  };
  json config = parse(cfg);
  fs::path gen = fs::path(dir) / "generation_config.json";
  json gen_json;
  bool has_gen = fs::exists(gen);
  if (has_gen) gen_json = parse(gen);
  return parse_hf_config(config, has_gen ? &gen_json : nullptr, cfg.string());
}

}  // namespace mtp::model
