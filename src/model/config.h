// The target model's architecture description, family-independent.
// One decoder implementation (forward.h) serves every family; the differences
// between Llama, Qwen2/3 and Gemma 2/3 are the flags below.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mtp::model {

enum class Arch { Llama, Qwen2, Qwen3, Gemma2, Gemma3 };
const char* arch_name(Arch a);  // "llama", "qwen2", ...

enum class Activation { SiLU, GeluTanh };

struct RopeScaling {
  enum class Type { None, Linear, Llama3 } type = Type::None;
  float factor = 1.0f;
  // llama3 only:
  float low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  int original_max_position = 8192;
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string source;  // "llama2c" | "hf"
  int d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int ffn = 0, vocab = 0, max_position = 0;
  float norm_eps = 1e-5f;
  bool norm_one_plus = false;   // Gemma: x̂ · (1 + w), the 1 added in fp32 at load
  Activation activation = Activation::SiLU;
  bool rope_interleaved = false;  // llama2.c/Meta pairs; HF is rotate-half
  float rope_theta = 10000.f;
  RopeScaling rope_scaling;       // applies to global (non-sliding) layers
  float rope_local_theta = 0.f;   // Gemma 3 sliding layers (0 = same as rope_theta)
  bool qkv_bias = false;          // Qwen2
  bool qk_norm = false;           // Qwen3, Gemma 3: RMSNorm per head on q and k
  bool sandwich_norms = false;    // Gemma 2/3: post-attention and post-ffn norms
  float embed_scale = 1.0f;       // Gemma: sqrt(d_model), in fp32
  float query_scale = 0.f;        // score scale; 0 = 1/sqrt(head_dim)
  float attn_softcap = 0.f;       // 0 = none
  float final_softcap = 0.f;      // 0 = none
  int sliding_window = 0;         // 0 = none
  std::vector<uint8_t> layer_sliding;  // [n_layers] 1 = sliding-window layer
  bool tie_embeddings = false;
  std::vector<int32_t> eos_ids;   // from config.json ∪ generation_config.json
  int32_t bos_id = -1;            // from config.json when given

  float score_scale() const;
  bool is_sliding(int layer) const { return !layer_sliding.empty() && layer_sliding[layer]; }
  // Throws ConfigError naming `where` (the file), the first impossible or
  // inconsistent field and its value: non-positive sizes, a head count that
  // does not divide the kv-head count, non-positive or non-finite eps/theta,
  // negative or non-finite scales and caps. Large but real values pass.
  void validate(const std::string& where = "model config") const;
  // Canonical JSON (sorted keys, every field) — input to the target fingerprint.
  nlohmann::json to_json() const;
};

}  // namespace mtp::model
