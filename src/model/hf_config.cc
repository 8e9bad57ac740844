// config.json -> ModelConfig, one section per function: the family, the
// sizes, RoPE, what would silently change the computation, the activation,
// Gemma's attention scales, the layer kinds, the special tokens. Family facts
// come from the family table (model/family.h).
#include "model/hf_config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "model/family.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::model {

namespace {

// No released checkpoint has more than a few hundred layers.
constexpr int kMaxLayers = 1 << 16;

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
  // def = 0: required.
  int int_or_required(const char* k, int def) const { return def ? get_int(k, def) : req_int(k); }
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

// The family: architectures[0] (a list, or one name as a string), else model_type.
struct Resolved {
  const Family* fam;
  std::string name;
  bool multimodal;
  bool moe;
};

Resolved resolve_family(const json& config, const Keys& top) {
  std::string name;
  if (config.contains("architectures") && !config.at("architectures").is_null()) {
    const json& a = config.at("architectures");
    if (a.is_string()) {
      name = a.get<std::string>();
    } else if (a.is_array() && !a.empty() && a[0].is_string()) {
      name = a[0].get<std::string>();
    } else {
      fail<ConfigError>("{}: 'architectures' must be a list of class names (or one name), got "
                        "{}", top.where, a.dump().substr(0, 200));
    }
  } else if (top.has("model_type")) {
    name = top.get_str("model_type", "");
  } else {
    fail<ConfigError>("{}: neither 'architectures' nor 'model_type' is given", top.where);
  }
  Resolved r{nullptr, name, false, false};
  r.fam = family_by_hf_name(name, &r.multimodal, &r.moe);
  if (!r.fam) {
    fail<ConfigError>("{}: unsupported architecture '{}' (supported: {})", top.where, name,
                      supported_hf_classes());
  }
  return r;
}

void parse_sizes(const Keys& k, const Family& f, ModelConfig& c) {
  c.d_model = k.req_int("hidden_size");
  c.ffn = k.req_int("intermediate_size");
  c.n_layers = k.req_int("num_hidden_layers");
  // Per-layer tables (the layer kinds, the loader's tensor list) are sized by
  // this before any tensor is seen: refuse what no checkpoint has (the
  // loader then checks the count against the tensors and the file size).
  if (c.n_layers <= 0 || c.n_layers > kMaxLayers) {
    fail<ConfigError>("{}: num_hidden_layers must be in 1..{}, got {}", k.where, kMaxLayers,
                      c.n_layers);
  }
  c.n_heads = k.int_or_required("num_attention_heads", f.n_heads);
  if (c.n_heads <= 0) {
    fail<ConfigError>("{}: num_attention_heads must be positive, got {}", k.where, c.n_heads);
  }
  c.n_kv_heads = k.get_int("num_key_value_heads", f.n_kv_heads ? f.n_kv_heads : c.n_heads);
  c.vocab = k.int_or_required("vocab_size", f.vocab);
  if (!k.has("head_dim") && f.head_dim == 0 && c.d_model % c.n_heads != 0) {
    fail<ConfigError>("{}: hidden_size {} is not a multiple of num_attention_heads {} (and no "
                      "head_dim is given)", k.where, c.d_model, c.n_heads);
  }
  c.head_dim = k.get_int("head_dim", f.head_dim ? f.head_dim : c.d_model / c.n_heads);
  c.max_position = k.get_int("max_position_embeddings", f.max_position);
  c.norm_eps = float(k.get_num("rms_norm_eps", 1e-6));
}

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

// rope_theta + rope_scaling (4.x) or rope_parameters (5.x, per layer type
// where the family has two).
void parse_rope(const Keys& k, const Family& f, ModelConfig& c) {
  double theta = k.get_num("rope_theta", f.rope_theta);
  RopeScaling scaling;
  double local_theta = f.local_rope ? k.get_num("rope_local_base_freq", 10000.0) : 0.0;
  double partial = f.linear_attention ? k.get_num("partial_rotary_factor", f.partial_rotary)
                                      : f.rope_partial;
  if (k.has("rope_parameters") && k.j.at("rope_parameters").is_object()) {
    const json& rp = k.j.at("rope_parameters");
    if (rp.contains("full_attention")) {  // per layer type
      Keys full{rp.at("full_attention"), k.where + " rope_parameters.full_attention"};
      theta = full.get_num("rope_theta", theta);
      if (f.rope_proportional && full.get_str("rope_type", "") == "proportional") {
        // Gemma 4: inv_freq of the rotated pairs / factor (linear scaling).
        partial = full.get_num("partial_rotary_factor", 1.0);
        if (!(partial > 0 && partial <= 1)) {
          fail<ConfigError>("{}: 'partial_rotary_factor' must be in (0, 1], got {}", full.where,
                            partial);
        }
        const double factor = full.get_num("factor", 1.0);
        if (!(factor > 0)) fail<ConfigError>("{}: 'factor' must be positive", full.where);
        if (factor != 1.0) scaling = {RopeScaling::Type::Linear, float(factor)};
      } else {
        partial = 1.0;
        scaling = parse_rope_scaling(rp.at("full_attention"), full.where);
      }
      if (rp.contains("sliding_attention")) {
        Keys slide{rp.at("sliding_attention"), k.where + " rope_parameters.sliding_attention"};
        local_theta = slide.get_num("rope_theta", local_theta);
        if (parse_rope_scaling(rp.at("sliding_attention"), slide.where).type !=
            RopeScaling::Type::None) {
          fail<ConfigError>("{}: rope scaling on sliding layers is not supported", slide.where);
        }
      }
    } else {
      const Keys rk{rp, k.where + " rope_parameters"};
      theta = rk.get_num("rope_theta", theta);
      scaling = parse_rope_scaling(rp, rk.where);
      if (f.linear_attention) partial = rk.get_num("partial_rotary_factor", partial);
    }
  } else if (k.present("rope_scaling")) {
    scaling = parse_rope_scaling(k.j.at("rope_scaling"), k.where);
  }
  c.rope_interleaved = false;  // HF rotate-half layout
  c.rope_theta = float(theta);
  c.rope_scaling = scaling;
  c.rope_local_theta = float(local_theta);
  if (!f.linear_attention) {
    c.rope_partial = float(partial);
    return;
  }
  // Qwen3.5: the first int(head_dim · partial_rotary_factor) dims rotate
  // (transformers' compute_default_rope_parameters); mrope sections are
  // inert for text, whose three position rows are equal.
  if (!(partial > 0 && partial <= 1)) {
    fail<ConfigError>("{}: 'partial_rotary_factor' must be in (0, 1], got {}", k.where, partial);
  }
  if (scaling.type != RopeScaling::Type::None) {
    fail<ConfigError>("{}: rope scaling with partial rotary embeddings is not supported for {}",
                      k.where, f.name);
  }
  c.rope_rotary_dim = int(double(c.head_dim) * partial);
}

// Keys that would change the computation in ways the decoder does not implement.
void refuse_unsupported(const Keys& k, const Family& f, const Resolved& r) {
  const std::string& name = r.name;
  if (f.moe_key && k.get_int(f.moe_key, 0) > 0) {
    fail<ConfigError>("{}: {} = {} ({}: a mixture-of-experts model) is not supported; the dense "
                      "{} models are", k.where, f.moe_key,
                      k.has(f.moe_key) ? k.j.at(f.moe_key).dump() : std::string("absent"), name,
                      f.name);
  }
  if (!f.qkv_bias && k.get_bool("attention_bias", false)) {
    fail<ConfigError>("{}: attention_bias=true is not supported for {}", k.where, name);
  }
  if (k.get_bool("mlp_bias", false)) {
    fail<ConfigError>("{}: mlp_bias=true is not supported for {}", k.where, name);
  }
  if (f.use_sliding_window_key && k.get_bool("use_sliding_window", false)) {
    fail<ConfigError>("{}: use_sliding_window=true (Qwen sliding-window attention) is not "
                      "supported", k.where);
  }
  if (k.get_bool("enable_moe_block", false)) {
    fail<ConfigError>("{}: enable_moe_block=true (mixture-of-experts layers, as Gemma 4 "
                      "26B-A4B) is not supported", k.where);
  }
  if (k.get_str("use_bidirectional_attention", "") == "all") {
    fail<ConfigError>("{}: use_bidirectional_attention='all' (non-causal attention) is not "
                      "supported", k.where);
  }
}

void check_activation(const Keys& k, const Family& f) {
  const std::string act = k.get_str(f.activation_key, f.activation_names[0]);
  if (act != f.activation_names[0] && act != f.activation_names[1]) {
    fail<ConfigError>("{}: unsupported {} '{}' (supported: {})", k.where, f.activation_key, act,
                      f.activation_names[0]);
  }
}

// Gemma: query_pre_attn_scalar and the soft-caps (absent -> the family
// default; null -> none, as transformers' None).
void parse_attention_scales(const Keys& k, const Family& f, ModelConfig& c) {
  if (f.query_pre_attn_scalar) {
    double qpas = k.get_num("query_pre_attn_scalar", 256.0);
    if (!(qpas > 0)) fail<ConfigError>("{}: query_pre_attn_scalar must be positive", k.where);
    c.query_scale = float(std::pow(qpas, -0.5));  // Python: scalar ** -0.5 in double
  }
  if (!f.softcaps) return;
  auto softcap = [&](const char* key, double dflt) {
    if (!k.present(key)) return float(dflt);
    if (!k.has(key)) return 0.f;
    double v = k.get_num(key, 0);
    if (!(v > 0)) fail<ConfigError>("{}: '{}' must be positive or null", k.where, key);
    return float(v);
  };
  c.attn_softcap = softcap("attn_logit_softcapping", f.attn_softcap);
  c.final_softcap = softcap("final_logit_softcapping", f.final_softcap);
}

// The sliding flag of every layer: layer_types, else the family's pattern.
// Qwen3.5: layer_types ("linear_attention" | "full_attention"), else layer
// i full iff (i + 1) % full_attention_interval == 0 (default 4), and the
// Gated DeltaNet shape (the linear_* keys, the family's defaults).
void parse_linear_layers(const Keys& k, const Family& f, ModelConfig& c) {
  std::vector<uint8_t> recurrent;
  if (k.has("layer_types")) {
    const json& lt = k.j.at("layer_types");
    if (!lt.is_array() || int(lt.size()) != c.n_layers) {
      fail<ConfigError>("{}: layer_types must list {} entries (num_hidden_layers)", k.where,
                        c.n_layers);
    }
    for (const json& t : lt) {
      if (t != "linear_attention" && t != "full_attention") {
        fail<ConfigError>("{}: unsupported layer type {} (supported: linear_attention, "
                          "full_attention)", k.where, t.dump());
      }
      recurrent.push_back(t == "linear_attention");
    }
  } else {
    const int every = k.get_int("full_attention_interval", 4);
    if (every <= 0) {
      fail<ConfigError>("{}: full_attention_interval must be positive, got {}", k.where, every);
    }
    for (int i = 0; i < c.n_layers; ++i) recurrent.push_back((i + 1) % every != 0);
  }
  c.set_uniform_layers(std::vector<uint8_t>(size_t(c.n_layers), 0));
  for (int i = 0; i < c.n_layers; ++i) c.layers[size_t(i)].recurrent = recurrent[size_t(i)] != 0;
  const LinearAttn& d = f.linear_defaults;
  c.linear.conv_kernel = k.get_int("linear_conv_kernel_dim", d.conv_kernel);
  c.linear.k_heads = k.get_int("linear_num_key_heads", d.k_heads);
  c.linear.v_heads = k.get_int("linear_num_value_heads", d.v_heads);
  c.linear.k_dim = k.get_int("linear_key_head_dim", d.k_dim);
  c.linear.v_dim = k.get_int("linear_value_head_dim", d.v_dim);
  c.mtp_layers = k.get_int("mtp_num_hidden_layers", 0);
  if (c.mtp_layers < 0) {
    fail<ConfigError>("{}: mtp_num_hidden_layers must be >= 0, got {}", k.where, c.mtp_layers);
  }
}

void parse_layer_kinds(const Keys& k, const Family& f, const std::string& name, ModelConfig& c) {
  if (f.linear_attention) return parse_linear_layers(k, f, c);
  if (f.sliding == SlidingPattern::None) {
    // Every layer global (Qwen's sliding_window is inert unless
    // use_sliding_window, refused above).
    if (k.has("layer_types")) {
      for (auto& t : k.j.at("layer_types")) {
        if (t != "full_attention") {
          fail<ConfigError>("{}: unsupported layer type {} for {}", k.where, t.dump(), name);
        }
      }
    }
    return;
  }
  int window = k.present("sliding_window") ? k.get_int("sliding_window", 0) : f.window;
  if (window < 0) fail<ConfigError>("{}: sliding_window must be positive", k.where);
  if (f.sliding == SlidingPattern::AllLayers && window == 0) return;  // null: no window
  std::vector<uint8_t> sliding;
  if (k.has("layer_types")) {
    const json& lt = k.j.at("layer_types");
    if (!lt.is_array() || int(lt.size()) != c.n_layers) {
      fail<ConfigError>("{}: layer_types must list {} entries", k.where, c.n_layers);
    }
    for (int i = 0; i < c.n_layers; ++i) {
      std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (t != "sliding_attention" && t != "full_attention") {
        fail<ConfigError>("{}: unsupported layer type '{}' (supported: sliding_attention, "
                          "full_attention)", k.where, t);
      }
      sliding.push_back(t == "sliding_attention");
    }
  } else {
    const int pattern = k.get_int("sliding_window_pattern", 6);
    if (pattern <= 0) fail<ConfigError>("{}: sliding_window_pattern must be positive", k.where);
    sliding = sliding_flags(f, c.n_layers, pattern);
  }
  if (f.last_layer_full) sliding.back() = 0;  // as transformers forces it
  c.set_uniform_layers(sliding);
  // sliding_window: null leaves "sliding" layers unwindowed (they keep the
  // local RoPE base in Gemma 3); a window spanning the whole context is that.
  c.sliding_window = window > 0 ? window : c.max_position;
  if (f.rope_scaling_everywhere && c.rope_scaling.type != RopeScaling::Type::None) {
    // The family scales every layer's RoPE, sliding ones included; the
    // engine applies scaling to global layers only.
    fail<ConfigError>("{}: rope_scaling on {} is not supported", k.where, f.name);
  }
}

// Gemma 4: full layers' own head_dim and kv-head count and K = V, then the
// last num_kv_shared_layers layers reading the K/V of the last earlier layer
// of their kind (with the double-wide MLP when use_double_wide_mlp).
void parse_layer_shapes(const Keys& k, const Family& f, ModelConfig& c) {
  if (!f.global_layer_shapes) return;
  const bool k_eq_v = k.get_bool("attention_k_eq_v", false);
  const int global_hd = k.get_int("global_head_dim", 512);
  const int global_kv = k_eq_v ? k.get_int("num_global_key_value_heads", c.n_kv_heads)
                               : c.n_kv_heads;
  for (LayerKind& l : c.layers) {
    if (l.sliding) continue;
    l.head_dim = global_hd > 0 ? global_hd : c.head_dim;
    l.n_kv_heads = global_kv;
    l.k_eq_v = k_eq_v;
  }
  if (!f.kv_sharing) return;
  const int shared = k.get_int("num_kv_shared_layers", 0);
  if (shared < 0 || shared >= c.n_layers) {
    fail<ConfigError>("{}: num_kv_shared_layers must be in 0..{} (num_hidden_layers - 1), got {}",
                      k.where, c.n_layers - 1, shared);
  }
  const bool double_wide = k.get_bool("use_double_wide_mlp", false);
  const int first = c.n_layers - shared;
  for (int l = first; l < c.n_layers; ++l) {
    LayerKind& kind = c.layers[size_t(l)];
    for (int o = first - 1; o >= 0 && kind.kv_source < 0; --o) {
      if (c.layers[size_t(o)].sliding == kind.sliding) kind.kv_source = o;
    }
    if (kind.kv_source < 0) {
      fail<ConfigError>("{}: num_kv_shared_layers = {} leaves no {} layer before layer {} to own "
                        "the K/V that layer reads", k.where, shared,
                        kind.sliding ? "sliding_attention" : "full_attention", first);
    }
    if (double_wide) kind.ffn = 2 * c.ffn;
  }
}

// Per-layer embeddings: hidden_size_per_layer_input (the family default when
// absent; 0 or null = none) over vocab_size_per_layer_input rows.
void parse_ple(const Keys& k, const Family& f, ModelConfig& c) {
  if (f.ple_dim == 0) return;
  c.ple_dim = k.present("hidden_size_per_layer_input")
                  ? k.get_int("hidden_size_per_layer_input", 0) : f.ple_dim;
  if (c.ple_dim < 0) {
    fail<ConfigError>("{}: hidden_size_per_layer_input must be >= 0, got {}", k.where, c.ple_dim);
  }
  const int rows = k.get_int("vocab_size_per_layer_input", c.vocab);
  if (c.ple_dim > 0 && rows != c.vocab) {
    fail<ConfigError>("{}: vocab_size_per_layer_input {} differs from vocab_size {} (the "
                      "per-layer table is looked up by the same token ids)", k.where, rows,
                      c.vocab);
  }
  if (c.ple_dim > 0) c.ple_embed_scale = std::sqrt(float(c.ple_dim));  // rounded at load
}

// eos_token_id / bos_token_id: int, list of ints, or null. Returns whether the
// key was present.
bool collect_ids(const json& j, const char* key, const std::string& where,
                 std::vector<int32_t>& out) {
  if (!j.is_object() || !j.contains(key)) return false;
  const json& v = j.at(key);
  auto one = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) {
      fail<ConfigError>("{}: '{}' must be a token id or a list of them, got {}", where, key,
                        v.dump().substr(0, 200));
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

// EOS ids (config ∪ text_config ∪ generation_config) and BOS, each inside the
// vocabulary (as the GGUF loader requires of its ids).
void parse_special_tokens(const json& config, const Keys& text, const json* gen,
                          const std::string& where, const Family& f, bool multimodal,
                          ModelConfig& c) {
  auto in_vocab = [&](const std::vector<int32_t>& ids, const std::string& file, const char* key) {
    for (int32_t id : ids) {
      if (id >= c.vocab) {
        fail<ConfigError>("{}: '{}' = {} is outside the vocabulary of {} (vocab_size)", file, key,
                          id, c.vocab);
      }
    }
  };
  std::vector<int32_t> eos, ids;
  bool in_config = collect_ids(config, "eos_token_id", where, ids);
  in_vocab(ids, where, "eos_token_id");
  eos = ids;
  if (multimodal) {
    ids.clear();
    in_config |= collect_ids(text.j, "eos_token_id", text.where, ids);
    in_vocab(ids, text.where, "eos_token_id");
    eos.insert(eos.end(), ids.begin(), ids.end());
  }
  if (!in_config && f.eos >= 0) eos.push_back(f.eos);
  if (gen) {
    ids.clear();
    collect_ids(*gen, "eos_token_id", "generation_config.json", ids);
    in_vocab(ids, "generation_config.json", "eos_token_id");
    eos.insert(eos.end(), ids.begin(), ids.end());
  }
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  c.eos_ids = eos;
  std::vector<int32_t> bos;
  const bool given = (multimodal && collect_ids(text.j, "bos_token_id", text.where, bos)) ||
                     collect_ids(config, "bos_token_id", where, bos);
  in_vocab(bos, where, "bos_token_id");
  c.bos_id = given ? (bos.empty() ? -1 : bos.front()) : f.bos;
}

}  // namespace

ModelConfig parse_hf_config(const json& config, const json* generation_config,
                            const std::string& where) {
  if (!config.is_object()) fail<ConfigError>("{}: not a JSON object", where);
  const Keys top{config, where};
  const Resolved r = resolve_family(config, top);
  const Family& f = *r.fam;
  if (r.moe) {  // before reading its (nested) layout
    const json& t = config.contains("text_config") && config.at("text_config").is_object()
                        ? config.at("text_config") : config;
    fail<ConfigError>("{}: {} = {} ({}: a mixture-of-experts model) is not supported; the dense "
                      "{} models are", where, f.moe_key,
                      t.contains(f.moe_key) ? t.at(f.moe_key).dump() : std::string("absent"),
                      r.name, f.name);
  }

  // The text model's keys: nested for a multimodal checkpoint.
  const json* text_json = &config;
  std::string text_where = where;
  if (r.multimodal) {
    if (!config.contains("text_config") || !config.at("text_config").is_object()) {
      fail<ConfigError>("{}: missing key 'text_config' ({} checkpoint)", where, r.name);
    }
    text_json = &config.at("text_config");
    text_where = where + " text_config";
  }
  const Keys k{*text_json, text_where};

  ModelConfig c;
  c.arch = f.arch;
  c.source = "hf";
  parse_sizes(k, f, c);
  parse_rope(k, f, c);
  refuse_unsupported(k, f, r);
  check_activation(k, f);
  apply_family(f, c);
  parse_attention_scales(k, f, c);
  parse_layer_kinds(k, f, r.name, c);
  parse_layer_shapes(k, f, c);
  parse_ple(k, f, c);
  c.tie_embeddings = k.has("tie_word_embeddings") ? k.get_bool("tie_word_embeddings", f.tie)
                                                  : top.get_bool("tie_word_embeddings", f.tie);
  parse_special_tokens(config, k, generation_config, where, f, r.multimodal, c);
  c.validate(text_where);
  return c;
}

ModelConfig read_hf_config(const std::string& dir) {
  fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::exists(cfg)) fail<IoError>("no config.json in '{}'", dir);
  // The one bounded JSON reader (core/json.h): depth limited, errors name the file.
  auto parse = [](const fs::path& p) { return parse_json(read_file(p.string()), "'" + p.string() + "'"); };
  json config = parse(cfg);
  fs::path gen = fs::path(dir) / "generation_config.json";
  json gen_json;
  bool has_gen = fs::exists(gen);
  if (has_gen) gen_json = parse(gen);
  return parse_hf_config(config, has_gen ? &gen_json : nullptr, cfg.string());
}

}  // namespace mtp::model
