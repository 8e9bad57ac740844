// The family table: one row per architecture, every fact about a family in
// one place. The Hugging Face parser (hf_config.cc), the GGUF parser
// (gguf_config.cc), widening (widen.cc, widen_write.cc), the layer tensor
// lists (layer_io.cc) and the chat-template recogniser (serve/chat_template.cc)
// read these rows; none of them tests an architecture by name. A family that
// is a variant of another (Mistral: Llama with a sliding window on every
// layer) is one more row.
#pragma once
#include <array>
#include <span>
#include <string>
#include <string_view>

#include "model/config.h"

namespace mtp::model {

// Which layers use sliding-window attention.
enum class SlidingPattern {
  None,        // every layer global (Qwen's sliding_window is inert: use_sliding_window is refused)
  EvenLayers,  // Gemma 2: layers 0, 2, 4, ... (or the config's layer_types)
  EveryNth,    // Gemma 3: layer i global iff (i + 1) % sliding_window_pattern == 0 (or layer_types)
  AllLayers,   // Mistral: every layer, when sliding_window is not null
};

// What a GGUF rope_freqs.weight tensor carries for the family.
enum class RopeFreqs {
  None,    // refused
  Llama3,  // llama3 RoPE scaling, as per-frequency factors (llama.cpp's converter)
  // Gemma 4: the global layers' proportional RoPE as [global head_dim / 2]
  // divisors, 1 on the rotated pairs and 1e30 on the others (the converter's
  // generate_extra_tensors): read back as rope_partial.
  Proportional,
};

// A name transformers knows the family by: a class of `architectures` or a
// `model_type`; multimodal = the text model's keys are under "text_config".
struct HfName {
  const char* name = nullptr;
  bool multimodal = false;
  bool moe = false;  // a mixture-of-experts variant: refused at parse, naming Family::moe_key
};

// Marker strings by which a Jinja chat template is recognised as the chat
// format `format` (serve/chat_template.h): all of `needs` present, `absent`
// not present.
struct ChatMarkers {
  const char* format = nullptr;
  std::array<const char*, 3> needs{};
  const char* absent = nullptr;
};

// A layer tensor's GGUF name (below "blk.N.") by its Hugging Face name
// (below "model.layers.N."), gguf-py's tensor map for the family. Qwen3.5's
// linear_attn.A_log is stored as ssm_a = -exp(A_log) (llama.cpp's converter).
struct TensorName {
  const char* hf;
  const char* gguf;
};

// Every field has the value most families have; a row sets the others.
struct Family {
  Arch arch = Arch::Llama;
  const char* name = nullptr;         // arch_name(): also in fingerprints and drafter files
  std::array<HfName, 8> hf{};         // architectures / model_type names (unused slots null)
  const char* text_class = nullptr;   // the text-only class (a widened multimodal checkpoint)
  const char* text_model_type = nullptr;
  const char* gguf_arch = nullptr;    // general.architecture; null: llama.cpp writes it as
  const char* gguf_written_as = nullptr;  // this family's arch instead (Mistral -> "llama")

  // transformers' config-class defaults, for keys real checkpoints omit
  int max_position = 0;
  double rope_theta = 10000.0;
  bool tie = false;
  int bos = -1, eos = -1;             // -1 = None
  int head_dim = 0;                   // 0 = hidden_size / num_attention_heads
  int n_heads = 0, n_kv_heads = 0, vocab = 0;  // when absent; 0 = required (kv: = heads)
  int window = 0;                     // sliding_window when the key is absent

  // the computation
  bool norm_one_plus = false;         // x̂ · (1 + w)
  bool sandwich_norms = false;        // post-attention and post-ffn norms
  Activation activation = Activation::SiLU;
  const char* activation_key = "hidden_act";  // the config key transformers reads
  std::array<const char*, 2> activation_names = {"silu", "swish"};  // accepted values of it
  bool qkv_bias = false;              // q/k/v biases, always (o never)
  bool qk_norm = false;               // RMSNorm per head on q and k
  bool embed_scale_sqrt_d = false;    // embedding × sqrt(hidden_size), in fp32
  bool query_pre_attn_scalar = false; // score scale query_pre_attn_scalar^-0.5 (default 256)
  bool softcaps = false;              // reads attn/final_logit_softcapping
  double attn_softcap = 0, final_softcap = 0;  // when the key is absent (null, 0 = none)
  SlidingPattern sliding = SlidingPattern::None;
  bool local_rope = false;            // sliding layers: rope_local_base_freq, unscaled
  bool rope_scaling_everywhere = false;  // scaling would apply to sliding layers too (refused)
  bool use_sliding_window_key = false;   // Qwen: use_sliding_window=true refused

  // GGUF (llama.cpp's conventions)
  bool gguf_qk_permuted = false;      // q/k rows permuted for llama.cpp's interleaved RoPE
  bool gguf_norms_plus_one = false;   // norm weights stored as 1 + w
  int gguf_window = 0;                // attention.sliding_window when absent (0 = no sliding)
  int gguf_big_layers = 0;            // block_count whose query scale is 1/sqrt(d / heads)
  RopeFreqs gguf_rope_freqs = RopeFreqs::None;

  std::span<const TensorName> gguf_layer_names;
  std::span<const TensorName> gguf_linear_names;  // recurrent layers' (Qwen3.5), beside those
  std::span<const ChatMarkers> chat;

  // Gemma 4's facts
  bool rope_proportional = false;     // full_attention rope_type "proportional"
  double rope_partial = 1.0;          // its partial_rotary_factor when rope_parameters is absent
  bool v_norm = false;                // weightless RMSNorm on each V head
  bool unit_query_scale = false;      // scores q·k with no 1/sqrt(head_dim) (q/k norms scale)
  bool embed_scale_in_weight_dtype = false;  // sqrt(d) rounded to the table's dtype
  bool layer_scalar = false;          // layers.N.layer_scalar multiplies the layer's output
  bool last_layer_full = false;       // the last layer is full attention whatever layer_types say
  bool global_layer_shapes = false;   // global_head_dim, num_global_key_value_heads, attention_k_eq_v
  bool kv_sharing = false;            // num_kv_shared_layers, use_double_wide_mlp
  int ple_dim = 0;                    // hidden_size_per_layer_input when absent (0: no PLE keys)
  // Qwen3.5's facts: Gated DeltaNet layers (layer_types linear_attention /
  // full_attention, else every full_attention_interval-th layer full; the
  // linear_* keys with these defaults), the sigmoid output gate of the full
  // layers, partial rotary (partial_rotary_factor, default 0.25), the native
  // MTP head (mtp_num_hidden_layers, tensors mtp.*).
  bool linear_attention = false;
  LinearAttn linear_defaults;
  double partial_rotary = 1.0;
  const char* moe_key = nullptr;      // the key a mixture-of-experts variant is refused by
  // Tensor prefixes of a multimodal checkpoint's towers: never opened or read.
  std::array<const char*, 6> hf_skipped{};
};

// Every row, in table order.
std::span<const Family> families();
const Family& family(Arch a);
// By a Hugging Face class or model_type name (nullptr if none); multimodal
// tells whether the name is of the nested text_config layout.
const Family* family_by_hf_name(const std::string& name, bool* multimodal = nullptr,
                                bool* moe = nullptr);
// By GGUF general.architecture (nullptr if none).
const Family* family_by_gguf_arch(const std::string& name);
// "LlamaForCausalLM, Qwen2ForCausalLM, ..." / "llama, qwen2, ...": for messages.
std::string supported_hf_classes();
std::string supported_gguf_archs();

// The family's computation flags on `c` (norm style, sandwich norms,
// activation, q/k/v biases, q/k norms, embedding and query scale, V norm,
// layer scalars): the ONE place these rules live, for every loader.
void apply_family(const Family& f, ModelConfig& c);

// The sliding flag of each of `n` layers for the family's pattern
// (`every_nth`: Gemma 3's sliding_window_pattern).
std::vector<uint8_t> sliding_flags(const Family& f, int n, int every_nth);

// Whether a Hugging Face tensor name lies under one of the family's skipped
// (tower) prefixes.
bool hf_tensor_skipped(const Family& f, std::string_view name);

// The chat format (a serve/chat_template.h name) whose markers the Jinja text
// carries, from the rows' ChatMarkers in table order; "" if none.
std::string chat_format_of(const std::string& jinja);
// Every chat format named in the table, in order (for messages).
std::string chat_format_names();

}  // namespace mtp::model
