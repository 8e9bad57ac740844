// The family table's rows (model/family.h). Defaults are those of each
// family's transformers config class; GGUF facts are llama.cpp's converter
// (convert_hf_to_gguf.py) and loader (src/llama-model.cpp) conventions.
#include "model/family.h"

#include <cctype>
#include <cmath>
#include <set>

#include "core/error.h"

namespace mtp::model {

namespace {

// gguf-py's names of the layer tensors every family has.
constexpr TensorName kLlamaNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},  // Llama's pre-FFN norm
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
// Gemma's post_attention_layernorm is the sandwich norm after attention
// (Qwen3.5 names its pre-FFN norm so too);
// Gemma 4 adds the per-layer-embedding tensors and the layer's output
// scalar (never listed for Gemma 2/3: their configs imply neither).
constexpr TensorName kGemmaNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"per_layer_input_gate.weight", "inp_gate.weight"},
    {"per_layer_projection.weight", "proj.weight"},
    {"post_per_layer_input_norm.weight", "post_norm.weight"},
    {"layer_scalar", "layer_output_scale.weight"},
};

// Qwen3.5's Gated DeltaNet tensors (gguf-py's qwen35 map); its other layer
// tensors are named as Gemma's (the pre-FFN norm is post_attention_norm).
constexpr TensorName kDeltaNetNames[] = {
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.A_log", "ssm_a"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},
    {"linear_attn.out_proj.weight", "ssm_out.weight"},
};

constexpr ChatMarkers kLlamaChat[] = {
    {"llama3", {"<|start_header_id|>", "<|eot_id|>"}, nullptr},
    {"llama2", {"[INST]", "[/INST]", "<<SYS>>"}, nullptr},
};
// The Qwen families' ChatML: Qwen3.5's own format (its tool calls in
// <function=...> and the thinking switch) before plain ChatML, so a Qwen 2/3
// template (no <function=) or Qwen3-Coder's (no thinking switch) stays ChatML.
constexpr ChatMarkers kChatML[] = {
    {"qwen35", {"<|im_start|>", "<function=", "enable_thinking"}, nullptr},
    {"chatml", {"<|im_start|>", "<|im_end|>"}, nullptr}};
constexpr ChatMarkers kGemmaChat[] = {{"gemma", {"<start_of_turn>", "<end_of_turn>"}, nullptr}};
constexpr ChatMarkers kMistralChat[] = {{"mistral", {"[INST]", "[/INST]"}, "<<SYS>>"}};
constexpr ChatMarkers kGemma4Chat[] = {{"gemma4", {"<|turn>", "<turn|>"}, nullptr}};

constexpr std::array<const char*, 2> kGeluTanh = {"gelu_pytorch_tanh", "gelu_new"};

const Family kFamilies[] = {
    {.arch = Arch::Llama, .name = "llama",
     .hf = {{{"LlamaForCausalLM"}, {"llama"}}},
     .text_class = "LlamaForCausalLM", .text_model_type = "llama",
     .gguf_arch = "llama", .gguf_written_as = "llama",
     .max_position = 2048, .bos = 1, .eos = 2,
     .gguf_qk_permuted = true, .gguf_rope_freqs = RopeFreqs::Llama3,
     .gguf_layer_names = kLlamaNames, .chat = kLlamaChat},
    {.arch = Arch::Qwen2, .name = "qwen2",
     .hf = {{{"Qwen2ForCausalLM"}, {"qwen2"}}},
     .text_class = "Qwen2ForCausalLM", .text_model_type = "qwen2",
     .gguf_arch = "qwen2", .gguf_written_as = "qwen2",
     .max_position = 32768,
     .qkv_bias = true, .use_sliding_window_key = true,
     .gguf_layer_names = kLlamaNames, .chat = kChatML},
    {.arch = Arch::Qwen3, .name = "qwen3",
     .hf = {{{"Qwen3ForCausalLM"}, {"qwen3"}}},
     .text_class = "Qwen3ForCausalLM", .text_model_type = "qwen3",
     .gguf_arch = "qwen3", .gguf_written_as = "qwen3",
     .max_position = 32768, .head_dim = 128,
     .qk_norm = true, .use_sliding_window_key = true,
     .gguf_layer_names = kLlamaNames, .chat = kChatML},
    {.arch = Arch::Gemma2, .name = "gemma2",
     .hf = {{{"Gemma2ForCausalLM"}, {"gemma2"}}},
     .text_class = "Gemma2ForCausalLM", .text_model_type = "gemma2",
     .gguf_arch = "gemma2", .gguf_written_as = "gemma2",
     .max_position = 8192, .tie = true, .bos = 2, .eos = 1,
     .head_dim = 256, .n_kv_heads = 4, .window = 4096,
     .norm_one_plus = true, .sandwich_norms = true, .activation = Activation::GeluTanh,
     .activation_key = "hidden_activation", .activation_names = kGeluTanh,
     .embed_scale_sqrt_d = true, .query_pre_attn_scalar = true,
     .softcaps = true, .attn_softcap = 50.0, .final_softcap = 30.0,
     .sliding = SlidingPattern::EvenLayers, .rope_scaling_everywhere = true,
     .gguf_norms_plus_one = true, .gguf_window = 4096, .gguf_big_layers = 46,
     .gguf_layer_names = kGemmaNames, .chat = kGemmaChat},
    {.arch = Arch::Gemma3, .name = "gemma3",
     .hf = {{{"Gemma3ForCausalLM"}, {"gemma3_text"}, {"Gemma3ForConditionalGeneration", true},
             {"gemma3", true}}},
     .text_class = "Gemma3ForCausalLM", .text_model_type = "gemma3_text",
     .gguf_arch = "gemma3", .gguf_written_as = "gemma3",
     .max_position = 131072, .rope_theta = 1000000.0, .tie = true, .bos = 2, .eos = 1,
     .head_dim = 256, .n_heads = 8, .n_kv_heads = 4, .vocab = 262208, .window = 4096,
     .norm_one_plus = true, .sandwich_norms = true, .activation = Activation::GeluTanh,
     .activation_key = "hidden_activation", .activation_names = kGeluTanh,
     .qk_norm = true, .embed_scale_sqrt_d = true, .query_pre_attn_scalar = true,
     .softcaps = true, .sliding = SlidingPattern::EveryNth, .local_rope = true,
     .gguf_norms_plus_one = true, .gguf_big_layers = 62,
     .gguf_layer_names = kGemmaNames, .chat = kGemmaChat,
     .hf_skipped = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                    "model.multi_modal_projector."}},
    // Llama with a sliding window on every layer (MistralConfig: 4096 by
    // default; null = none). llama.cpp converts it as arch "llama", dropping
    // the window, so a Mistral GGUF loads as a Llama.
    {.arch = Arch::Mistral, .name = "mistral",
     .hf = {{{"MistralForCausalLM"}, {"mistral"}}},
     .text_class = "MistralForCausalLM", .text_model_type = "mistral",
     .gguf_arch = nullptr, .gguf_written_as = "llama",
     .max_position = 4096 * 32, .bos = 1, .eos = 2,
     .n_kv_heads = 8, .window = 4096,
     .sliding = SlidingPattern::AllLayers, .rope_scaling_everywhere = true,
     .gguf_qk_permuted = true,
     .gguf_layer_names = kLlamaNames, .chat = kMistralChat},
    // Gemma 4 (Gemma4TextConfig; E2B/E4B/31B dense, the MoE 26B-A4B refused):
    // two layer kinds (sliding: head_dim, num_key_value_heads, default RoPE
    // with the sliding theta; full: global_head_dim, num_global_key_value_heads
    // under attention_k_eq_v, proportional RoPE), the last layer full, the
    // last num_kv_shared_layers layers reading the K/V of the last earlier
    // layer of their kind, per-layer embeddings, plain norm weights, q/k
    // norms and a weightless V norm instead of a score scale.
    {.arch = Arch::Gemma4, .name = "gemma4",
     .hf = {{{"Gemma4ForCausalLM"}, {"gemma4_text"}, {"Gemma4ForConditionalGeneration", true},
             {"gemma4", true}}},
     .text_class = "Gemma4ForCausalLM", .text_model_type = "gemma4_text",
     .gguf_arch = "gemma4", .gguf_written_as = "gemma4",
     .max_position = 131072, .rope_theta = 1000000.0, .tie = true, .bos = 2, .eos = 1,
     .head_dim = 256, .n_heads = 8, .n_kv_heads = 4, .vocab = 262144, .window = 512,
     .sandwich_norms = true, .activation = Activation::GeluTanh,
     .activation_key = "hidden_activation", .activation_names = kGeluTanh,
     .qk_norm = true, .embed_scale_sqrt_d = true,
     .softcaps = true, .sliding = SlidingPattern::EveryNth, .local_rope = true,
     .gguf_rope_freqs = RopeFreqs::Proportional,
     .gguf_layer_names = kGemmaNames, .chat = kGemma4Chat,
     .rope_proportional = true, .rope_partial = 0.25, .v_norm = true, .unit_query_scale = true,
     .embed_scale_in_weight_dtype = true, .layer_scalar = true, .last_layer_full = true,
     .global_layer_shapes = true, .kv_sharing = true, .ple_dim = 256,
     .hf_skipped = {"model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                    "model.embed_audio."}},
    // Qwen3.5 (Qwen3_5TextConfig; 0.8B/2B/4B/9B/27B dense; the MoE variants
    // 35B-A3B and larger refused: num_experts): three Gated DeltaNet layers to
    // one gated full-attention layer, (1 + w) norms everywhere but the gated
    // norm of the DeltaNet output, q/k norms, partial rotary, GQA, the native
    // MTP head. llama.cpp writes the norms as 1 + w and reorders the value
    // heads (LinearAttn::v_tiled).
    {.arch = Arch::Qwen35, .name = "qwen35",
     .hf = {{{"Qwen3_5ForCausalLM"}, {"qwen3_5_text"}, {"Qwen3_5ForConditionalGeneration", true},
             {"qwen3_5", true}, {"Qwen3_5MoeForCausalLM", false, true},
             {"qwen3_5_moe_text", false, true}, {"Qwen3_5MoeForConditionalGeneration", true, true},
             {"qwen3_5_moe", true, true}}},
     .text_class = "Qwen3_5ForCausalLM", .text_model_type = "qwen3_5_text",
     .gguf_arch = "qwen35", .gguf_written_as = "qwen35",
     .max_position = 32768, .head_dim = 256, .n_heads = 16, .n_kv_heads = 4, .vocab = 248320,
     .norm_one_plus = true, .qk_norm = true,
     .gguf_norms_plus_one = true,
     .gguf_layer_names = kGemmaNames, .gguf_linear_names = kDeltaNetNames, .chat = kChatML,
     .linear_attention = true,
     .linear_defaults = {.conv_kernel = 4, .k_heads = 16, .v_heads = 32, .k_dim = 128,
                         .v_dim = 128},
     .partial_rotary = 0.25, .moe_key = "num_experts",
     .hf_skipped = {"model.visual."}},
};

}  // namespace

std::span<const Family> families() { return kFamilies; }

const Family& family(Arch a) {
  for (const Family& f : kFamilies) {
    if (f.arch == a) return f;
  }
  MTP_CHECK(false, "architecture {} has no row in the family table", int(a));
}

const Family* family_by_hf_name(const std::string& name, bool* multimodal, bool* moe) {
  for (const Family& f : kFamilies) {
    for (const HfName& n : f.hf) {
      if (n.name && name == n.name) {
        if (multimodal) *multimodal = n.multimodal;
        if (moe) *moe = n.moe;
        return &f;
      }
    }
  }
  return nullptr;
}

const Family* family_by_gguf_arch(const std::string& name) {
  for (const Family& f : kFamilies) {
    if (f.gguf_arch && name == f.gguf_arch) return &f;
  }
  return nullptr;
}

std::string supported_hf_classes() {
  std::string out;
  for (const Family& f : kFamilies) {
    for (const HfName& n : f.hf) {
      // Class names only (model_type spellings are lower case), not the
      // refused mixture-of-experts variants.
      if (n.name && !n.moe && std::isupper(static_cast<unsigned char>(n.name[0]))) {
        out += (out.empty() ? "" : ", ") + std::string(n.name);
      }
    }
  }
  return out;
}

std::string supported_gguf_archs() {
  std::string out;
  for (const Family& f : kFamilies) {
    if (f.gguf_arch) out += (out.empty() ? "" : ", ") + std::string(f.gguf_arch);
  }
  return out;
}

void apply_family(const Family& f, ModelConfig& c) {
  c.norm_one_plus = f.norm_one_plus;
  c.sandwich_norms = f.sandwich_norms;
  c.activation = f.activation;
  c.qkv_bias = f.qkv_bias;
  c.qk_norm = f.qk_norm;
  c.embed_scale = f.embed_scale_sqrt_d ? std::sqrt(float(c.d_model)) : 1.0f;  // fp32
  if (f.unit_query_scale) c.query_scale = 1.0f;
  c.v_norm = f.v_norm;
  c.layer_scalar = f.layer_scalar;
  c.attn_gate = f.linear_attention;
}

bool hf_tensor_skipped(const Family& f, std::string_view name) {
  for (const char* p : f.hf_skipped) {
    if (p && name.starts_with(p)) return true;
  }
  return false;
}

std::vector<uint8_t> sliding_flags(const Family& f, int n, int every_nth) {
  std::vector<uint8_t> s(size_t(n), 0);
  for (int i = 0; i < n; ++i) {
    switch (f.sliding) {
      case SlidingPattern::None: break;
      case SlidingPattern::EvenLayers: s[size_t(i)] = i % 2 == 0; break;
      case SlidingPattern::EveryNth: s[size_t(i)] = (i + 1) % every_nth != 0; break;
      case SlidingPattern::AllLayers: s[size_t(i)] = 1; break;
    }
  }
  return s;
}

std::string chat_format_of(const std::string& jinja) {
  auto has = [&](const char* s) { return jinja.find(s) != std::string::npos; };
  for (const Family& f : kFamilies) {
    for (const ChatMarkers& m : f.chat) {
      bool all = true;
      for (const char* need : m.needs) all = all && (!need || has(need));
      if (all && (!m.absent || !has(m.absent))) return m.format;
    }
  }
  return "";
}

std::string chat_format_names() {
  std::string out;
  std::set<std::string> seen;
  for (const Family& f : kFamilies) {
    for (const ChatMarkers& m : f.chat) {
      if (seen.insert(m.format).second) out += (out.empty() ? "" : ", ") + std::string(m.format);
    }
  }
  return out;
}

}  // namespace mtp::model
