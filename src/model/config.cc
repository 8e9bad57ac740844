#include "model/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/family.h"

namespace mtp::model {

const char* arch_name(Arch a) { return family(a).name; }

float ModelConfig::score_scale() const {
  return query_scale > 0.f ? query_scale : 1.0f / std::sqrt(float(head_dim));
}

LayerKind ModelConfig::layer_kind(int l) const {
  if (!layers.empty()) return layers[size_t(l)];
  LayerKind k;
  k.head_dim = head_dim;
  k.n_kv_heads = n_kv_heads;
  k.ffn = ffn;
  return k;
}

bool ModelConfig::has_recurrent() const {
  for (const LayerKind& k : layers) {
    if (k.recurrent) return true;
  }
  return false;
}

void ModelConfig::set_uniform_layers(const std::vector<uint8_t>& sliding) {
  LayerKind k;
  k.head_dim = head_dim;
  k.n_kv_heads = n_kv_heads;
  k.ffn = ffn;
  layers.assign(sliding.size(), k);
  for (size_t l = 0; l < sliding.size(); ++l) layers[l].sliding = sliding[l] != 0;
}

void ModelConfig::validate(const std::string& where, const FieldName& field) const {
  auto key = [&](const char* hf) { return field ? field(hf) : std::string(hf); };
  auto pos = [&](const char* name, long v) {
    if (v <= 0) fail<ConfigError>("{}: {} must be positive, got {}", where, key(name), v);
  };
  pos("hidden_size", d_model);
  pos("num_hidden_layers", n_layers);
  pos("num_attention_heads", n_heads);
  pos("num_key_value_heads", n_kv_heads);
  pos("head_dim", head_dim);
  pos("intermediate_size", ffn);
  pos("vocab_size", vocab);
  pos("max_position_embeddings", max_position);
  if (!layers.empty() && int64_t(layers.size()) != n_layers) {
    fail<ConfigError>("{}: {} layer kinds for {} = {} layers", where, layers.size(),
                      key("num_hidden_layers"), n_layers);
  }
  for (int l = 0; l < n_layers; ++l) {
    const LayerKind k = layer_kind(l);
    if (k.head_dim <= 0 || k.n_kv_heads <= 0 || k.ffn <= 0) {
      fail<ConfigError>("{}: layer {} has head_dim {}, {} kv heads and ffn {} (each must be "
                        "positive)", where, l, k.head_dim, k.n_kv_heads, k.ffn);
    }
    if (n_heads % k.n_kv_heads != 0) {
      fail<ConfigError>("{}: {} {} is not a multiple of {} {}{}", where,
                        key("num_attention_heads"), n_heads, key("num_key_value_heads"),
                        k.n_kv_heads, layers.empty() ? "" : fmt::format(" (layer {})", l));
    }
    if (k.head_dim % 2 != 0) {
      fail<ConfigError>("{}: {} {} must be even{}", where, key("head_dim"), k.head_dim,
                        layers.empty() ? "" : fmt::format(" (layer {})", l));
    }
    // q/k/v widths must fit the int arithmetic of the kernels.
    if (int64_t(n_heads) * k.head_dim > (int64_t(1) << 30)) {
      fail<ConfigError>("{}: {} {} x {} {} is too large", where, key("num_attention_heads"),
                        n_heads, key("head_dim"), k.head_dim);
    }
    if (k.sliding && sliding_window <= 0) {
      fail<ConfigError>("{}: layer {} is a sliding layer but {} is {}", where, l,
                        key("sliding_window"), sliding_window);
    }
    if (!k.owns_kv()) {
      const int o = k.kv_source;
      if (o >= l || !layers[size_t(o)].owns_kv() || layers[size_t(o)].sliding != k.sliding ||
          layers[size_t(o)].head_dim != k.head_dim ||
          layers[size_t(o)].n_kv_heads != k.n_kv_heads || layers[size_t(o)].k_eq_v != k.k_eq_v) {
        fail<ConfigError>("{}: layer {} reads the K/V of layer {}, which is not an earlier "
                          "layer of the same kind that owns its K/V", where, l, o);
      }
    }
  }
  if (has_recurrent()) validate_linear(where, key);
  if (rope_rotary_dim < 0 || rope_rotary_dim % 2 != 0 || rope_rotary_dim > head_dim) {
    fail<ConfigError>("{}: {} x {} = {} rotary dims per head; they must be even and at most {} "
                      "{}", where, key("partial_rotary_factor"), key("head_dim"),
                      rope_rotary_dim, key("head_dim"), head_dim);
  }
  if (ple_dim < 0) {
    fail<ConfigError>("{}: {} must be >= 0, got {}", where, key("hidden_size_per_layer_input"),
                      ple_dim);
  }
  if (!(rope_partial > 0.f && rope_partial <= 1.f)) {
    fail<ConfigError>("{}: {} must be in (0, 1], got {}", where, key("partial_rotary_factor"),
                      rope_partial);
  }
  if (sliding_window < 0) {
    fail<ConfigError>("{}: {} must be >= 0, got {}", where, key("sliding_window"),
                      sliding_window);
  }
  // Positive and finite (NaN fails every comparison).
  auto positive = [&](const char* name, float v) {
    if (!(v > 0) || !std::isfinite(v)) {
      fail<ConfigError>("{}: {} must be a positive finite number, got {}", where, key(name), v);
    }
  };
  auto non_negative = [&](const char* name, float v) {
    if (!(v >= 0) || !std::isfinite(v)) {
      fail<ConfigError>("{}: {} must be a finite number >= 0, got {}", where, key(name), v);
    }
  };
  positive("rms_norm_eps", norm_eps);
  positive("rope_theta", rope_theta);
  non_negative("rope_local_base_freq", rope_local_theta);
  positive("embed_scale", embed_scale);
  positive("ple_embed_scale", ple_embed_scale);
  non_negative("query_pre_attn_scalar", query_scale);
  non_negative("attn_logit_softcapping", attn_softcap);
  non_negative("final_logit_softcapping", final_softcap);
  if (rope_scaling.type != RopeScaling::Type::None) {
    positive("rope_scaling.factor", rope_scaling.factor);
    if (rope_scaling.type == RopeScaling::Type::Llama3) {
      positive("rope_scaling.low_freq_factor", rope_scaling.low_freq_factor);
      positive("rope_scaling.high_freq_factor", rope_scaling.high_freq_factor);
      pos("rope_scaling.original_max_position_embeddings", rope_scaling.original_max_position);
      if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor)) {
        fail<ConfigError>("{}: {} {} must exceed {} {}", where,
                          key("rope_scaling.high_freq_factor"), rope_scaling.high_freq_factor,
                          key("rope_scaling.low_freq_factor"), rope_scaling.low_freq_factor);
      }
    }
  }
}

void ModelConfig::validate_linear(const std::string& where,
                                  const std::function<std::string(const char*)>& key) const {
  const LinearAttn& a = linear;
  auto in = [&](const char* name, int v, int hi) {
    if (v <= 0 || v > hi) {
      fail<ConfigError>("{}: {} must be in 1..{} (the model has recurrent layers), got {}", where,
                        key(name), hi, v);
    }
  };
  in("linear_conv_kernel_dim", a.conv_kernel, 64);
  in("linear_num_key_heads", a.k_heads, 1 << 12);
  in("linear_num_value_heads", a.v_heads, 1 << 12);
  in("linear_key_head_dim", a.k_dim, 1 << 12);
  in("linear_value_head_dim", a.v_dim, 1 << 12);
  if (a.v_heads % a.k_heads != 0) {
    fail<ConfigError>("{}: {} {} is not a multiple of {} {}", where, key("linear_num_value_heads"),
                      a.v_heads, key("linear_num_key_heads"), a.k_heads);
  }
  // One layer's state per sequence (a 27B's: 48 x 128 x 128 values).
  if (a.state_floats() > (size_t(1) << 28)) {
    fail<ConfigError>("{}: {} {} x {} {} x {} {} is a recurrent state of {} values per layer "
                      "and sequence (at most 2^28)", where, key("linear_num_value_heads"),
                      a.v_heads, key("linear_key_head_dim"), a.k_dim, key("linear_value_head_dim"),
                      a.v_dim, a.state_floats());
  }
}

ModelConfig native_mtp_config(const ModelConfig& c) {
  ModelConfig m = c;
  m.n_layers = 1;
  m.set_uniform_layers({0});
  m.mtp_layers = 0;
  return m;
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j;
  j["arch"] = arch_name(arch);
  j["d_model"] = d_model;
  j["n_layers"] = n_layers;
  j["n_heads"] = n_heads;
  j["n_kv_heads"] = n_kv_heads;
  j["head_dim"] = head_dim;
  j["ffn"] = ffn;
  j["vocab"] = vocab;
  j["max_position"] = max_position;
  j["norm_eps"] = norm_eps;
  j["norm_one_plus"] = norm_one_plus;
  j["activation"] = activation == Activation::SiLU ? "silu" : "gelu_tanh";
  j["rope_interleaved"] = rope_interleaved;
  j["rope_theta"] = rope_theta;
  j["rope_local_theta"] = rope_local_theta;
  j["rope_scaling"] = {{"type", int(rope_scaling.type)},
                       {"factor", rope_scaling.factor},
                       {"low_freq_factor", rope_scaling.low_freq_factor},
                       {"high_freq_factor", rope_scaling.high_freq_factor},
                       {"original_max_position", rope_scaling.original_max_position}};
  j["qkv_bias"] = qkv_bias;
  j["qk_norm"] = qk_norm;
  j["sandwich_norms"] = sandwich_norms;
  j["embed_scale"] = embed_scale;
  j["query_scale"] = query_scale;
  j["attn_softcap"] = attn_softcap;
  j["final_softcap"] = final_softcap;
  j["sliding_window"] = sliding_window;
  std::vector<uint8_t> sliding;
  for (const LayerKind& k : layers) sliding.push_back(k.sliding ? 1 : 0);
  j["layer_sliding"] = sliding;
  // Layer kinds beyond the sliding flag only where some layer differs from
  // the config's sizes, so configs of the uniform families keep the JSON (and
  // the target fingerprints) they always had.
  bool uniform = true;
  for (const LayerKind& k : layers) {
    LayerKind plain;
    plain.sliding = k.sliding;
    plain.head_dim = head_dim;
    plain.n_kv_heads = n_kv_heads;
    plain.ffn = ffn;
    uniform = uniform && k == plain;
  }
  if (!uniform) {
    nlohmann::json kinds = nlohmann::json::array();
    for (const LayerKind& k : layers) {
      kinds.push_back({{"sliding", k.sliding}, {"head_dim", k.head_dim},
                       {"n_kv_heads", k.n_kv_heads}, {"ffn", k.ffn}, {"kv_source", k.kv_source},
                       {"k_eq_v", k.k_eq_v}, {"recurrent", k.recurrent}});
    }
    j["layer_kinds"] = kinds;
  }
  // Fields of the later families, only where they are in use (see above).
  if (rope_partial != 1.f) j["rope_partial"] = rope_partial;
  if (v_norm) j["v_norm"] = true;
  if (layer_scalar) j["layer_scalar"] = true;
  if (rope_rotary_dim > 0) j["rope_rotary_dim"] = rope_rotary_dim;
  if (attn_gate) j["attn_gate"] = true;
  if (has_recurrent()) {
    j["linear"] = {{"conv_kernel", linear.conv_kernel}, {"k_heads", linear.k_heads},
                   {"v_heads", linear.v_heads}, {"k_dim", linear.k_dim},
                   {"v_dim", linear.v_dim}, {"v_tiled", linear.v_tiled}};
  }
  if (ple_dim > 0) {
    j["ple_dim"] = ple_dim;
    j["ple_embed_scale"] = ple_embed_scale;
  }
  j["tie_embeddings"] = tie_embeddings;
  return j;  // nlohmann::json objects are key-sorted: canonical by construction
}

}  // namespace mtp::model
