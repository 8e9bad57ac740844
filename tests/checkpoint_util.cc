#include "checkpoint_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "qwen35_checkpoint.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::test {

namespace {

using model::Arch;

bool is_gemma(Arch a) { return a == Arch::Gemma2 || a == Arch::Gemma3; }
// Families whose norms store w for their (1 + w).
bool one_plus_norms(Arch a) { return is_gemma(a) || a == Arch::Qwen35; }

// splitmix64: a tiny, portable generator (std::normal_distribution's output
// is implementation-defined; these values must not depend on the library).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double((next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
  float normal() {  // Box-Muller
    double u = uniform(), v = uniform();
    return float(std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v));
  }
};

// The language model's tensors are named below "model." whatever layout
// holds them, so a multimodal checkpoint holds the text-only one's values.
uint64_t name_seed(uint64_t seed, std::string name) {
  for (const char* p : {"model.language_model.", "language_model.model."}) {
    if (name.starts_with(p)) name = "model." + name.substr(std::string_view(p).size());
  }
  if (name == "language_model.lm_head.weight") name = "lm_head.weight";
  uint64_t h = 0xcbf29ce484222325ull ^ seed;  // FNV-1a over the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Random values for one tensor, by role (see the header for the scales).
std::vector<float> random_values(const RandomSpec& s, const std::string& name,
                                 const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  Rng rng{name_seed(s.seed, name)};
  std::vector<float> v(n);
  auto ends = [&](const char* suf) {
    std::string_view x(suf);
    return name.size() >= x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0;
  };
  // Qwen3.5's gated DeltaNet norm is a plain w (1 + 0.1·N), its other norms 1 + w.
  const bool plain_norm = ends("linear_attn.norm.weight");
  const bool norm = ends("norm.weight");
  const bool scalar = ends("layer_scalar");
  const bool embed = ends("embed_tokens.weight");
  const bool bias = ends(".bias");
  float scale = 0.5f / std::sqrt(float(shape.size() == 2 ? shape[1] : shape[0]));
  if (embed) scale = 0.1f;
  if (bias) scale = 0.02f;
  if (norm) scale = 0.1f;
  if (ends("conv1d.weight")) scale = 0.5f / std::sqrt(float(shape.back()));  // [C, 1, kc]
  float offset = norm && (!one_plus_norms(s.arch) || plain_norm) ? 1.0f : 0.0f;
  if (scalar) scale = 0.1f, offset = 0.8f;  // Gemma 4's layer output scalars: O(1), not 1
  for (auto& x : v) x = offset + scale * rng.normal();
  return v;
}

std::vector<uint8_t> store(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  if (t == DType::F32) {
    std::memcpy(out.data(), v.data(), out.size());
  } else if (t == DType::BF16 || t == DType::F16) {
    auto* o = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < v.size(); ++i) o[i] = t == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
  } else {
    fail<InputError>("random checkpoints store F32, BF16 or F16, not {}", dtype_name(t));
  }
  return out;
}

// The ids a real config lists: those inside the vocabulary (the family
// defaults name ids of the real vocabularies, which the tests shrink).
std::vector<int32_t> in_vocab(const std::vector<int32_t>& ids, int vocab) {
  std::vector<int32_t> out;
  for (int32_t id : ids) {
    if (id < vocab) out.push_back(id);
  }
  return out;
}

json ids_json(const std::vector<int32_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return json(ids);
}

const char* torch_dtype(DType t) {
  return t == DType::BF16 ? "bfloat16" : t == DType::F16 ? "float16" : "float32";
}

}  // namespace

RandomSpec RandomSpec::for_arch(Arch a) {
  RandomSpec s;
  s.arch = a;
  switch (a) {
    case Arch::Llama:
      break;  // the struct defaults: d 64, 2 layers, 4 heads / 2 KV, head_dim 16
    case Arch::Qwen2:
      s.tie = true;  // as the small Qwen2/2.5 checkpoints
      s.rope_theta = 1000000.f;
      s.gen_eos_ids = {2, 3};
      break;
    case Arch::Qwen3:
      s.head_dim = 32;  // heads · head_dim != d, as in Qwen3-0.6B
      s.tie = true;
      s.rope_theta = 1000000.f;
      s.gen_eos_ids = {2, 3};
      break;
    case Arch::Gemma2:
      s.head_dim = 32;
      s.ffn = 128;
      s.vocab = 384;
      s.sliding_window = 16;
      s.tie = true;
      s.bos_id = 2;
      s.eos_ids = {1, 107};
      break;
    case Arch::Mistral:
      s.sliding_window = 6;  // every layer sliding; shorter than the tests' sequences
      break;
    case Arch::Gemma4:
      // Both layer kinds (sliding head_dim 16, full 32 with proportional
      // RoPE), the last two layers reading the K/V of layers 3 (sliding) and
      // 2 (full) with double-wide MLPs, per-layer embeddings.
      s.n_layers = 6;
      s.layer_types = {"sliding_attention", "sliding_attention", "full_attention",
                       "sliding_attention", "sliding_attention", "full_attention"};
      s.global_head_dim = 32;
      s.kv_shared = 2;
      s.double_wide = true;
      s.ple_dim = 8;
      s.ffn = 96;
      s.vocab = 384;
      s.sliding_window = 6;
      s.tie = true;
      s.bos_id = 2;
      s.eos_ids = {1, 106};
      s.rope_theta = 1000000.f;
      s.final_softcap = 30.f;
      break;
    case Arch::Qwen35:
      // Three Gated DeltaNet layers and a gated full-attention layer, 2 key
      // heads read by 4 value heads, partial rotary (8 of 32 dims), tied.
      s.n_layers = 4;
      s.head_dim = 32;
      s.tie = true;
      s.rope_theta = 10000000.f;
      s.eos_ids = {2, 3};
      break;
    case Arch::Gemma3:
      s.n_layers = 6;  // pattern 6: layers 0-4 sliding, layer 5 global
      s.n_kv_heads = 1;
      s.head_dim = 32;
      s.ffn = 128;
      s.vocab = 384;
      s.sliding_window = 8;
      s.tie = true;
      s.bos_id = 2;
      s.eos_ids = {1, 106};
      s.rope_theta = 1000000.f;
      break;
  }
  return s;
}

json hf_config_json(const RandomSpec& s) {
  json c;
  c["hidden_size"] = s.d_model;
  c["intermediate_size"] = s.ffn;
  c["num_hidden_layers"] = s.n_layers;
  c["num_attention_heads"] = s.n_heads;
  c["num_key_value_heads"] = s.n_kv_heads;
  c["vocab_size"] = s.vocab;
  c["max_position_embeddings"] = s.max_position;
  c["rms_norm_eps"] = 1e-6;
  c["rope_theta"] = s.rope_theta;
  c["tie_word_embeddings"] = s.tie;
  c["bos_token_id"] = s.bos_id < s.vocab ? json(s.bos_id) : json(nullptr);
  c["eos_token_id"] = ids_json(in_vocab(s.eos_ids, s.vocab));
  c["torch_dtype"] = torch_dtype(s.dtype);
  c["initializer_range"] = 0.02;
  c["attention_dropout"] = 0.0;
  c["use_cache"] = true;
  c["transformers_version"] = "4.50.0";
  const float qpas = s.query_pre_attn_scalar > 0 ? s.query_pre_attn_scalar : float(s.head_dim);
  // An integer where it is one, as real Gemma configs write it (transformers
  // 5 refuses a float there).
  const nlohmann::json qpas_json =
      qpas == float(int64_t(qpas)) ? nlohmann::json(int64_t(qpas)) : nlohmann::json(qpas);
  switch (s.arch) {
    case Arch::Llama:
      c["architectures"] = {"LlamaForCausalLM"};
      c["model_type"] = "llama";
      c["head_dim"] = s.head_dim;
      c["hidden_act"] = "silu";
      c["attention_bias"] = false;
      c["mlp_bias"] = false;
      c["pretraining_tp"] = 1;
      c["rope_scaling"] = nullptr;
      break;
    case Arch::Qwen2:
      // Qwen2 configs carry no head_dim: it is hidden_size / heads.
      if (s.head_dim * s.n_heads != s.d_model) {
        fail<InputError>("Qwen2 random checkpoint needs head_dim · heads == d_model");
      }
      c["architectures"] = {"Qwen2ForCausalLM"};
      c["model_type"] = "qwen2";
      c["hidden_act"] = "silu";
      c["max_window_layers"] = s.n_layers;
      c["sliding_window"] = s.max_position;  // inert: use_sliding_window is false
      c["use_sliding_window"] = false;
      break;
    case Arch::Qwen3:
      c["architectures"] = {"Qwen3ForCausalLM"};
      c["model_type"] = "qwen3";
      c["head_dim"] = s.head_dim;
      c["hidden_act"] = "silu";
      c["attention_bias"] = false;
      c["max_window_layers"] = s.n_layers;
      c["rope_scaling"] = nullptr;
      c["sliding_window"] = nullptr;
      c["use_sliding_window"] = false;
      break;
    case Arch::Mistral:
      // MistralConfig as Mistral-7B-v0.1 writes it: head_dim absent (derived),
      // sliding_window on every layer.
      if (s.head_dim * s.n_heads != s.d_model) {
        fail<InputError>("Mistral random checkpoint needs head_dim · heads == d_model");
      }
      c["architectures"] = {"MistralForCausalLM"};
      c["model_type"] = "mistral";
      c["hidden_act"] = "silu";
      c["sliding_window"] = s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr);
      break;
    case Arch::Gemma4: {
      c["architectures"] = {"Gemma4ForCausalLM"};
      c["model_type"] = "gemma4_text";
      c["head_dim"] = s.head_dim;
      c["global_head_dim"] = s.global_head_dim > 0 ? s.global_head_dim : s.head_dim;
      c["hidden_activation"] = "gelu_pytorch_tanh";
      c["attention_bias"] = false;
      c["attention_k_eq_v"] = s.k_eq_v;
      c["num_global_key_value_heads"] =
          s.n_global_kv_heads > 0 ? nlohmann::json(s.n_global_kv_heads) : nlohmann::json(nullptr);
      c["num_kv_shared_layers"] = s.kv_shared;
      c["use_double_wide_mlp"] = s.double_wide;
      c["hidden_size_per_layer_input"] = s.ple_dim;
      c["vocab_size_per_layer_input"] = s.vocab;
      c["final_logit_softcapping"] =
          s.final_softcap > 0 ? nlohmann::json(s.final_softcap) : nlohmann::json(nullptr);
      c["sliding_window"] = s.sliding_window;
      c["layer_types"] = s.layer_types;
      c["rope_parameters"] = {
          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
          {"full_attention",
           {{"rope_type", "proportional"}, {"partial_rotary_factor", s.partial_rotary},
            {"rope_theta", s.rope_theta}}}};
      c.erase("rope_theta");
      c["enable_moe_block"] = false;
      c["use_bidirectional_attention"] = nullptr;
      c["pad_token_id"] = 0;
      break;
    }
    case Arch::Qwen35:
      qwen35_config(s, c);
      break;
    case Arch::Gemma2:
      c["architectures"] = {"Gemma2ForCausalLM"};
      c["model_type"] = "gemma2";
      c["head_dim"] = s.head_dim;
      c["hidden_act"] = "gelu_pytorch_tanh";
      c["hidden_activation"] = "gelu_pytorch_tanh";
      c["attention_bias"] = false;
      c["attn_logit_softcapping"] = 50.0;
      c["final_logit_softcapping"] = 30.0;
      c["query_pre_attn_scalar"] = qpas_json;
      c["sliding_window"] = s.sliding_window;
      c["cache_implementation"] = "hybrid";
      c["pad_token_id"] = 0;
      break;
    case Arch::Gemma3:
      c["architectures"] = {"Gemma3ForCausalLM"};
      c["model_type"] = "gemma3_text";
      c["head_dim"] = s.head_dim;
      c["hidden_activation"] = "gelu_pytorch_tanh";
      c["attention_bias"] = false;
      c["attn_logit_softcapping"] = nullptr;
      c["final_logit_softcapping"] = nullptr;
      c["query_pre_attn_scalar"] = qpas_json;
      c["rope_local_base_freq"] = 10000.0;
      c["rope_scaling"] = nullptr;
      c["sliding_window"] = s.sliding_window;
      c["sliding_window_pattern"] = s.sliding_pattern;
      c["cache_implementation"] = "hybrid";
      c["pad_token_id"] = 0;
      break;
  }
  if (s.nested_text_config && s.arch == Arch::Qwen35) return qwen35_nested_config(s, c);
  if (s.nested_text_config && (s.arch == Arch::Gemma3 || s.arch == Arch::Gemma4)) {
    // Gemma3/4ForConditionalGeneration: the text model's keys under
    // text_config, the towers' configs and the tie flag at the top (Gemma 3:
    // the special tokens too, as the released 4B config).
    const bool g3 = s.arch == Arch::Gemma3;
    json text = c;
    for (const char* k : {"architectures", "torch_dtype", "transformers_version",
                          "tie_word_embeddings"}) {
      text.erase(k);
    }
    if (g3) text.erase("bos_token_id"), text.erase("eos_token_id");
    if (!s.config_patch.is_null()) text.merge_patch(s.config_patch);
    json top;
    top["architectures"] = {g3 ? "Gemma3ForConditionalGeneration" : "Gemma4ForConditionalGeneration"};
    top["model_type"] = g3 ? "gemma3" : "gemma4";
    top["text_config"] = text;
    if (g3) {
      top["vision_config"] = {{"model_type", "siglip_vision_model"}, {"hidden_size", 4}};
      top["eos_token_id"] = ids_json(in_vocab(s.eos_ids, s.vocab));
      top["bos_token_id"] = s.bos_id < s.vocab ? json(s.bos_id) : json(nullptr);
      top["mm_tokens_per_image"] = 256;
    } else {
      top["vision_config"] = {{"model_type", "gemma4_vision"}, {"hidden_size", 4}};
      top["audio_config"] = {{"model_type", "gemma4_audio"}, {"hidden_size", 4}};
    }
    top["tie_word_embeddings"] = s.tie;
    top["torch_dtype"] = torch_dtype(s.dtype);
    top["transformers_version"] = g3 ? "4.50.0" : "5.5.0";
    return top;
  }
  if (!s.config_patch.is_null()) c.merge_patch(s.config_patch);
  return c;
}

std::vector<Gemma4Layer> gemma4_layers(const RandomSpec& s) {
  std::vector<Gemma4Layer> out(size_t(s.n_layers));
  const int first_shared = s.n_layers - s.kv_shared;
  for (int i = 0; i < s.n_layers; ++i) {
    Gemma4Layer& l = out[size_t(i)];
    l.full = s.layer_types.empty() ? (i + 1) % 6 == 0 || i == s.n_layers - 1
                                   : s.layer_types[size_t(i)] == "full_attention";
    l.head_dim = l.full && s.global_head_dim > 0 ? s.global_head_dim : s.head_dim;
    l.kv_heads = l.full && s.k_eq_v && s.n_global_kv_heads > 0 ? s.n_global_kv_heads
                                                                : s.n_kv_heads;
    l.k_eq_v = l.full && s.k_eq_v;
    l.shared = i >= first_shared;
    l.ffn = l.shared && s.double_wide ? 2 * s.ffn : s.ffn;
  }
  return out;
}

void write_random_hf_checkpoint(const std::string& dir, const RandomSpec& s) {
  fs::create_directories(dir);
  const bool q35 = s.arch == Arch::Qwen35;
  const bool nested =
      (s.arch == Arch::Gemma3 || s.arch == Arch::Gemma4 || q35) && s.nested_text_config;
  const std::string prefix = !s.weight_prefix.empty()               ? s.weight_prefix
                             : !nested                               ? "model."
                             : s.arch == Arch::Gemma4 || q35 ? "model.language_model."
                                                                     : "language_model.model.";
  const std::string lm_head =
      prefix == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
  const int64_t d = s.d_model, v = s.vocab;
  const bool g4 = s.arch == Arch::Gemma4;
  const std::vector<Gemma4Layer> g4l = g4 ? gemma4_layers(s) : std::vector<Gemma4Layer>{};

  std::vector<std::pair<std::string, std::vector<int64_t>>> spec;
  spec.push_back({prefix + "embed_tokens.weight", {v, d}});
  if (g4 && s.ple_dim > 0) {
    const int64_t all = int64_t(s.n_layers) * s.ple_dim;
    spec.push_back({prefix + "embed_tokens_per_layer.weight", {v, all}});
    spec.push_back({prefix + "per_layer_model_projection.weight", {all, d}});
    spec.push_back({prefix + "per_layer_projection_norm.weight", {s.ple_dim}});
  }
  for (int i = 0; i < s.n_layers && q35; ++i) {
    qwen35_layer_tensors(s, prefix + "layers." + std::to_string(i) + ".", qwen35_linear(s, i), spec);
  }
  for (int i = 0; i < s.n_layers && !q35; ++i) {
    std::string p = prefix + "layers." + std::to_string(i) + ".";
    const int64_t hd = g4 ? g4l[size_t(i)].head_dim : s.head_dim, q = int64_t(s.n_heads) * hd;
    const int64_t kv = int64_t(g4 ? g4l[size_t(i)].kv_heads : s.n_kv_heads) * hd;
    const int64_t f = g4 ? g4l[size_t(i)].ffn : s.ffn;
    // Gemma 4's shared layers keep no K/V weights here (real checkpoints may:
    // the loader ignores them; tests add them with extra_tensors).
    const bool own_kv = !g4 || !g4l[size_t(i)].shared;
    spec.push_back({p + "input_layernorm.weight", {d}});
    spec.push_back({p + "self_attn.q_proj.weight", {q, d}});
    if (own_kv) spec.push_back({p + "self_attn.k_proj.weight", {kv, d}});
    if (own_kv && !(g4 && g4l[size_t(i)].k_eq_v)) spec.push_back({p + "self_attn.v_proj.weight", {kv, d}});
    spec.push_back({p + "self_attn.o_proj.weight", {d, q}});
    if (s.arch == Arch::Qwen2) {
      spec.push_back({p + "self_attn.q_proj.bias", {q}});
      spec.push_back({p + "self_attn.k_proj.bias", {kv}});
      spec.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (s.arch == Arch::Qwen3 || s.arch == Arch::Gemma3 || g4) {
      spec.push_back({p + "self_attn.q_norm.weight", {hd}});
      if (own_kv) spec.push_back({p + "self_attn.k_norm.weight", {hd}});
    }
    spec.push_back({p + "post_attention_layernorm.weight", {d}});
    if (is_gemma(s.arch) || g4) {
      spec.push_back({p + "pre_feedforward_layernorm.weight", {d}});
      spec.push_back({p + "post_feedforward_layernorm.weight", {d}});
    }
    spec.push_back({p + "mlp.gate_proj.weight", {f, d}});
    spec.push_back({p + "mlp.up_proj.weight", {f, d}});
    spec.push_back({p + "mlp.down_proj.weight", {d, f}});
    if (g4 && s.ple_dim > 0) {
      spec.push_back({p + "per_layer_input_gate.weight", {s.ple_dim, d}});
      spec.push_back({p + "per_layer_projection.weight", {d, s.ple_dim}});
      spec.push_back({p + "post_per_layer_input_norm.weight", {d}});
    }
    if (g4) spec.push_back({p + "layer_scalar", {1}});
  }
  spec.push_back({prefix + "norm.weight", {d}});
  if (!s.tie) spec.push_back({lm_head, {v, d}});
  if (q35 && s.mtp) {  // the native MTP head (transformers drops it; vLLM reads it)
    spec.push_back({"mtp.fc.weight", {d, 2 * d}});
    spec.push_back({"mtp.pre_fc_norm_embedding.weight", {d}});
    spec.push_back({"mtp.pre_fc_norm_hidden.weight", {d}});
    spec.push_back({"mtp.norm.weight", {d}});
    qwen35_layer_tensors(s, "mtp.layers.0.", false, spec);
  }
  if (nested && q35) {  // a vision-tower tensor the loader must never read
    spec.push_back({"model.visual.blocks.0.mlp.linear_fc1.weight", {16, 8}});
  } else if (nested && g4) {  // the towers' tensors the loader must never read
    spec.push_back({"model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight", {8, 4}});
    spec.push_back({"model.audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight", {8, 4}});
    spec.push_back({"model.embed_vision.embedding_projection.weight", {d, 4}});
  } else if (nested) {  // a vision-tower tensor the loader must ignore
    std::string vt = prefix == "model.language_model." ? "model.vision_tower." : "vision_tower.";
    spec.push_back({vt + "vision_model.embeddings.patch_embedding.weight", {4, 4}});
  }
  for (auto& e : s.extra_tensors) spec.push_back(e);

  // Values, then bytes in the stored dtype.
  struct Stored {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Stored> tensors;
  for (auto& [name, shape0] : spec) {
    std::vector<int64_t> shape = shape0;
    std::vector<float> values = random_values(s, name, shape);
    if (s.edit) s.edit(name, shape, values);
    if (shape.empty()) continue;
    tensors.push_back({name, shape, store(values, s.dtype)});
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const Stored& a, const Stored& b) { return a.name < b.name; });

  // Files: one, or `shards` contiguous runs of the sorted names.
  const int n_files = std::max(1, s.shards);
  const io::Metadata meta = {{"format", "pt"}};
  uint64_t total = 0;
  json weight_map = json::object();
  for (int k = 0; k < n_files; ++k) {
    size_t b = tensors.size() * size_t(k) / size_t(n_files);
    size_t e = tensors.size() * size_t(k + 1) / size_t(n_files);
    std::string file = n_files == 1 ? "model.safetensors"
                                    : fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, n_files);
    std::vector<io::TensorView> views;
    for (size_t i = b; i < e; ++i) {
      auto& t = tensors[i];
      views.push_back({t.name, s.dtype, t.shape, t.bytes.data(), t.bytes.size()});
      weight_map[t.name] = file;
      total += t.bytes.size();
    }
    io::write_safetensors((fs::path(dir) / file).string(), views, meta);
  }
  if (n_files > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(2));
  }

  write_file_atomic((fs::path(dir) / "config.json").string(), hf_config_json(s).dump(2));
  json gen = {{"_from_model_config", true},
              {"bos_token_id", s.bos_id < s.vocab ? json(s.bos_id) : json(nullptr)},
              {"eos_token_id", ids_json(in_vocab(s.gen_eos_ids.empty() ? s.eos_ids : s.gen_eos_ids, s.vocab))},
              {"transformers_version", "4.50.0"}};
  write_file_atomic((fs::path(dir) / "generation_config.json").string(), gen.dump(2));
}

std::vector<float> random_tensor_values(const RandomSpec& spec, const std::string& name,
                                        const std::vector<int64_t>& shape) {
  return random_values(spec, name, shape);
}

std::vector<uint8_t> stored_bytes(const std::vector<float>& values, DType dtype) {
  return store(values, dtype);
}

std::vector<model::Arch> every_arch() {
  std::vector<model::Arch> out;
  for (const model::Family& f : model::families()) out.push_back(f.arch);
  return out;
}

std::vector<uint8_t> sliding_of(const model::ModelConfig& c) {
  std::vector<uint8_t> out;
  for (const model::LayerKind& k : c.layers) out.push_back(k.sliding ? 1 : 0);
  return out;
}

std::string random_hf_checkpoint(const std::string& tag, const RandomSpec& spec) {
  std::string dir = temp_dir(tag);
  write_random_hf_checkpoint(dir, spec);
  return dir;
}

}  // namespace mtp::test
