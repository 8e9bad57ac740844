#include "model/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mtp::model {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Gemma2: return "gemma2";
    case Arch::Gemma3: return "gemma3";
  }
  return "?";
}

float ModelConfig::score_scale() const {
  return query_scale > 0.f ? query_scale : 1.0f / std::sqrt(float(head_dim));
}

void ModelConfig::validate(const std::string& where) const {
  auto pos = [&](const char* name, long v) {
    if (v <= 0) fail<ConfigError>("{}: {} must be positive, got {}", where, name, v);
  };
  pos("hidden_size", d_model);
  pos("num_hidden_layers", n_layers);
  pos("num_attention_heads", n_heads);
  pos("num_key_value_heads", n_kv_heads);
  pos("head_dim", head_dim);
  pos("intermediate_size", ffn);
  pos("vocab_size", vocab);
  pos("max_position_embeddings", max_position);
  if (n_heads % n_kv_heads != 0) {
    fail<ConfigError>("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                      where, n_heads, n_kv_heads);
  }
  if (head_dim % 2 != 0) fail<ConfigError>("{}: head_dim {} must be even", where, head_dim);
  // q/k/v widths must fit the int arithmetic of the kernels.
  if (int64_t(n_heads) * head_dim > (int64_t(1) << 30)) {
    fail<ConfigError>("{}: num_attention_heads {} x head_dim {} is too large", where, n_heads,
                      head_dim);
  }
  if (!layer_sliding.empty() && int64_t(layer_sliding.size()) != n_layers) {
    fail<ConfigError>("{}: {} sliding-layer flags for {} layers", where, layer_sliding.size(),
                      n_layers);
  }
  if (sliding_window < 0) {
    fail<ConfigError>("{}: sliding_window must be >= 0, got {}", where, sliding_window);
  }
  for (auto f : layer_sliding) {
    if (f && sliding_window <= 0) fail<ConfigError>("{}: sliding layer without window", where);
  }
  // Positive and finite (NaN fails every comparison).
  auto positive = [&](const char* name, float v) {
    if (!(v > 0) || !std::isfinite(v)) {
      fail<ConfigError>("{}: {} must be a positive finite number, got {}", where, name, v);
    }
  };
  auto non_negative = [&](const char* name, float v) {
    if (!(v >= 0) || !std::isfinite(v)) {
      fail<ConfigError>("{}: {} must be a finite number >= 0, got {}", where, name, v);
    }
  };
  positive("rms_norm_eps", norm_eps);
  positive("rope_theta", rope_theta);
  non_negative("rope_local_base_freq", rope_local_theta);
  positive("embed_scale", embed_scale);
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
        fail<ConfigError>("{}: rope_scaling.high_freq_factor {} must exceed low_freq_factor {}",
                          where, rope_scaling.high_freq_factor, rope_scaling.low_freq_factor);
      }
    }
  }
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
  j["layer_sliding"] = layer_sliding;
  j["tie_embeddings"] = tie_embeddings;
  return j;  // nlohmann::json objects are key-sorted: canonical by construction
}

}  // namespace mtp::model
