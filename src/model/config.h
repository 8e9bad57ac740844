// The target model's architecture description, family-independent.
// One decoder implementation (forward.h) serves every family; the differences
// between the families are the fields below, set from the family table
// (model/family.h) and the checkpoint's own values.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mtp::model {

enum class Arch { Llama, Qwen2, Qwen3, Gemma2, Gemma3, Mistral, Gemma4, Qwen35 };
const char* arch_name(Arch a);  // "llama", "qwen2", ... (the family table's names)

enum class Activation { SiLU, GeluTanh };

struct RopeScaling {
  enum class Type { None, Linear, Llama3 } type = Type::None;
  float factor = 1.0f;
  // llama3 only:
  float low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  int original_max_position = 8192;
};

// One decoder layer's shape and role. Families whose layers are all alike
// but for the sliding flag leave ModelConfig::layers empty or fill it with
// records equal to the config's own sizes (layer_kind() gives every layer's).
struct LayerKind {
  bool sliding = false;  // sliding-window attention (ModelConfig::sliding_window)
  int head_dim = 0;      // this layer's q/k/v head width
  int n_kv_heads = 0;
  int ffn = 0;           // MLP width
  // -1: the layer computes and caches its own K/V. Otherwise the earlier
  // layer whose cached K/V this layer attends with (it computes none).
  int kv_source = -1;
  bool k_eq_v = false;     // V is K's projection (no v_proj): Gemma 4 full layers, attention_k_eq_v
  // A Gated DeltaNet layer (Qwen3.5's linear_attention): no K/V, a recurrent
  // state per sequence (ModelConfig::linear, model/linear_attn.h); head_dim
  // and n_kv_heads then carry the config's values and are not used.
  bool recurrent = false;
  bool owns_kv() const { return kv_source < 0; }
  bool operator==(const LayerKind&) const = default;
};

// The shape of the Gated DeltaNet layers (Qwen3.5's linear attention; every
// recurrent layer of a model has it). Per sequence and layer the state is
// [v_heads, k_dim, v_dim] fp32 plus the last conv_kernel - 1 inputs of the
// causal convolution over the conv_dim channels q, k, v.
struct LinearAttn {
  int conv_kernel = 0;            // linear_conv_kernel_dim
  int k_heads = 0, v_heads = 0;   // linear_num_key_heads, linear_num_value_heads
  int k_dim = 0, v_dim = 0;       // linear_key_head_dim, linear_value_head_dim
  // Which key head a value head reads: false (Hugging Face) v head h reads
  // k head h / (v_heads / k_heads); true (llama.cpp's GGUF, whose converter
  // reorders the value heads) h % k_heads.
  bool v_tiled = false;
  int key_dim() const { return k_heads * k_dim; }
  int value_dim() const { return v_heads * v_dim; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
  int k_head_of(int v_head) const {
    return v_tiled ? v_head % k_heads : v_head / (v_heads / k_heads);
  }
  // fp32 values of one layer's recurrent state per sequence.
  size_t state_floats() const { return size_t(v_heads) * size_t(k_dim) * size_t(v_dim); }
  bool operator==(const LinearAttn&) const = default;
};

// The source's own name of a config field, for messages: the Hugging Face key
// (the default) or, for GGUF, the metadata key ("llama.context_length").
using FieldName = std::function<std::string(const char* hf_key)>;

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string source;  // "llama2c" | "hf" | "gguf" | "random"
  int d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int ffn = 0, vocab = 0, max_position = 0;
  float norm_eps = 1e-5f;
  bool norm_one_plus = false;   // Gemma 2/3: x̂ · (1 + w), the 1 added in fp32 at load
  Activation activation = Activation::SiLU;
  bool rope_interleaved = false;  // llama2.c/Meta pairs; HF is rotate-half
  float rope_theta = 10000.f;
  RopeScaling rope_scaling;       // applies to global (non-sliding) layers
  float rope_local_theta = 0.f;   // Gemma 3/4 sliding layers (0 = same as rope_theta)
  // Global layers' "proportional" RoPE (Gemma 4): the first
  // floor(rope_partial · head_dim / 2) frequency pairs rotate with
  // theta^(-2i/head_dim), the others not at all. 1 = every pair.
  float rope_partial = 1.0f;
  // Partial rotary embedding (Qwen3.5): only the first rope_rotary_dim dims
  // of each q/k head rotate, rotate-half pairs (i, i + rope_rotary_dim / 2)
  // with theta^(-2i / rope_rotary_dim); 0 = the whole head.
  int rope_rotary_dim = 0;
  // Qwen3.5's attention output gate: q_proj gives per head hd query rows and
  // then hd gate rows; the attention output is multiplied by sigmoid(gate).
  bool attn_gate = false;
  LinearAttn linear;              // the recurrent layers' shape (Qwen3.5)
  // Layers of the checkpoint's native multi-token-prediction head
  // (mtp_num_hidden_layers; GGUF nextn_predict_layers): loaded into
  // ModelWeights::mtp, never part of the forward. 0 = none.
  int mtp_layers = 0;
  bool qkv_bias = false;          // Qwen2
  bool qk_norm = false;           // Qwen3, Gemma 3: RMSNorm per head on q and k
  bool sandwich_norms = false;    // Gemma 2/3: post-attention and post-ffn norms
  float embed_scale = 1.0f;       // Gemma: sqrt(d_model), in fp32 (Gemma 4: in the table's dtype)
  float query_scale = 0.f;        // score scale; 0 = 1/sqrt(head_dim)
  bool v_norm = false;            // Gemma 4: RMSNorm without weight on each V head
  bool layer_scalar = false;      // Gemma 4: each layer's output × its stored scalar
  // Per-layer embeddings (Gemma 4 E2B/E4B): a [vocab, n_layers · ple_dim]
  // table, looked up per token (× ple_embed_scale), plus a projection of the
  // layer-0 input, feed a ple_dim-wide signal into every layer. 0 = none.
  int ple_dim = 0;
  float ple_embed_scale = 1.0f;   // sqrt(ple_dim) in the table's dtype
  float attn_softcap = 0.f;       // 0 = none
  float final_softcap = 0.f;      // 0 = none
  int sliding_window = 0;         // 0 = none
  // [n_layers] each layer's kind, or empty: every layer full attention with
  // the sizes above (Llama, Qwen, llama2.c). Families with a sliding pattern
  // fill it (layer_kinds()).
  std::vector<LayerKind> layers;
  bool tie_embeddings = false;
  std::vector<int32_t> eos_ids;   // from config.json ∪ generation_config.json
  int32_t bos_id = -1;            // from config.json when given

  float score_scale() const;
  // Layer l's kind (the config's sizes when `layers` is empty).
  LayerKind layer_kind(int l) const;
  bool is_sliding(int layer) const { return !layers.empty() && layers[size_t(layer)].sliding; }
  bool is_recurrent(int layer) const {
    return !layers.empty() && layers[size_t(layer)].recurrent;
  }
  bool has_recurrent() const;
  // The rotated dims of a full layer's head of width hd (rope_rotary_dim, or hd).
  int rotary_dim(int hd) const { return rope_rotary_dim > 0 ? rope_rotary_dim : hd; }
  // Every layer full attention with the config's sizes except for the given
  // sliding flags ([n_layers]): the layer kinds of the families before Gemma 4.
  void set_uniform_layers(const std::vector<uint8_t>& sliding);
  // Throws ConfigError naming `where` (the file), the first impossible or
  // inconsistent field (by `name`: the source's own key) and its value:
  // non-positive sizes, a head count that does not divide the kv-head count,
  // non-positive or non-finite eps/theta, negative or non-finite scales and
  // caps, layer kinds that disagree with the layer count or read K/V from a
  // later layer, recurrent layers without a valid LinearAttn shape (kernel,
  // head counts, head widths, value heads a multiple of key heads, a state
  // past 2^28 values), a rotary width that is odd or wider than the head.
  // Large but real values pass.
  void validate(const std::string& where = "model config", const FieldName& name = {}) const;
  void validate_linear(const std::string& where,
                       const std::function<std::string(const char*)>& key) const;
  // Canonical JSON (sorted keys, every field) — input to the target fingerprint.
  nlohmann::json to_json() const;
};

// The config of the native MTP head's layer (ModelConfig::mtp_layers): one
// full-attention layer of the target's attention shape (n_layers 1, no
// recurrent layer), everything else as the target's.
ModelConfig native_mtp_config(const ModelConfig& c);

}  // namespace mtp::model
