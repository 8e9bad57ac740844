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

void ModelConfig::validate() const {
  auto pos = [](const char* name, long v) {
    if (v <= 0) fail<ConfigError>("model config: {} must be positive, got {}", name, v);
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
    fail<ConfigError>("model config: num_attention_heads {} is not a multiple of "
                      "num_key_value_heads {}", n_heads, n_kv_heads);
  }
  if (head_dim % 2 != 0) fail<ConfigError>("model config: head_dim {} must be even", head_dim);
  if (!layer_sliding.empty() && int(layer_sliding.size()) != n_layers) {
    fail<ConfigError>("model config: {} sliding-layer flags for {} layers",
                      layer_sliding.size(), n_layers);
  }
  for (auto f : layer_sliding) {
    if (f && sliding_window <= 0) fail<ConfigError>("model config: sliding layer without window");
  }
  if (!(norm_eps > 0.f)) fail<ConfigError>("model config: rms_norm_eps must be > 0");
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
