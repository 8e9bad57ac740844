#include "checkpoint_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::test {

namespace {

using model::Arch;

bool is_gemma(Arch a) { return a == Arch::Gemma2 || a == Arch::Gemma3; }

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

uint64_t name_seed(uint64_t seed, const std::string& name) {
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
  const bool norm = ends("norm.weight");
  const bool embed = ends("embed_tokens.weight");
  const bool bias = ends(".bias");
  float scale = 0.5f / std::sqrt(float(shape.size() == 2 ? shape[1] : shape[0]));
  if (embed) scale = 0.1f;
  if (bias) scale = 0.02f;
  if (norm) scale = 0.1f;
  const float offset = norm && !is_gemma(s.arch) ? 1.0f : 0.0f;
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
  c["bos_token_id"] = s.bos_id;
  c["eos_token_id"] = ids_json(s.eos_ids);
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
  if (s.arch == Arch::Gemma3 && s.nested_text_config) {
    // Gemma3ForConditionalGeneration: text model keys under text_config,
    // special tokens and the tie flag at the top, as the released 4B config.
    json text = c;
    for (const char* k : {"architectures", "bos_token_id", "eos_token_id", "torch_dtype",
                          "transformers_version", "tie_word_embeddings"}) {
      text.erase(k);
    }
    if (!s.config_patch.is_null()) text.merge_patch(s.config_patch);
    json top;
    top["architectures"] = {"Gemma3ForConditionalGeneration"};
    top["model_type"] = "gemma3";
    top["text_config"] = text;
    top["vision_config"] = {{"model_type", "siglip_vision_model"}, {"hidden_size", 4}};
    top["eos_token_id"] = ids_json(s.eos_ids);
    top["bos_token_id"] = s.bos_id;
    top["tie_word_embeddings"] = s.tie;
    top["mm_tokens_per_image"] = 256;
    top["torch_dtype"] = torch_dtype(s.dtype);
    top["transformers_version"] = "4.50.0";
    return top;
  }
  if (!s.config_patch.is_null()) c.merge_patch(s.config_patch);
  return c;
}

void write_random_hf_checkpoint(const std::string& dir, const RandomSpec& s) {
  fs::create_directories(dir);
  const bool nested = s.arch == Arch::Gemma3 && s.nested_text_config;
  const std::string prefix =
      !s.weight_prefix.empty() ? s.weight_prefix : nested ? "language_model.model." : "model.";
  const std::string lm_head =
      prefix == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
  const int64_t d = s.d_model, hd = s.head_dim, q = int64_t(s.n_heads) * hd,
                kv = int64_t(s.n_kv_heads) * hd, f = s.ffn, v = s.vocab;

  std::vector<std::pair<std::string, std::vector<int64_t>>> spec;
  spec.push_back({prefix + "embed_tokens.weight", {v, d}});
  for (int i = 0; i < s.n_layers; ++i) {
    std::string p = prefix + "layers." + std::to_string(i) + ".";
    spec.push_back({p + "input_layernorm.weight", {d}});
    spec.push_back({p + "self_attn.q_proj.weight", {q, d}});
    spec.push_back({p + "self_attn.k_proj.weight", {kv, d}});
    spec.push_back({p + "self_attn.v_proj.weight", {kv, d}});
    spec.push_back({p + "self_attn.o_proj.weight", {d, q}});
    if (s.arch == Arch::Qwen2) {
      spec.push_back({p + "self_attn.q_proj.bias", {q}});
      spec.push_back({p + "self_attn.k_proj.bias", {kv}});
      spec.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (s.arch == Arch::Qwen3 || s.arch == Arch::Gemma3) {
      spec.push_back({p + "self_attn.q_norm.weight", {hd}});
      spec.push_back({p + "self_attn.k_norm.weight", {hd}});
    }
    spec.push_back({p + "post_attention_layernorm.weight", {d}});
    if (is_gemma(s.arch)) {
      spec.push_back({p + "pre_feedforward_layernorm.weight", {d}});
      spec.push_back({p + "post_feedforward_layernorm.weight", {d}});
    }
    spec.push_back({p + "mlp.gate_proj.weight", {f, d}});
    spec.push_back({p + "mlp.up_proj.weight", {f, d}});
    spec.push_back({p + "mlp.down_proj.weight", {d, f}});
  }
  spec.push_back({prefix + "norm.weight", {d}});
  if (!s.tie) spec.push_back({lm_head, {v, d}});
  if (nested) {  // a vision-tower tensor the loader must ignore
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
              {"bos_token_id", s.bos_id},
              {"eos_token_id", ids_json(s.gen_eos_ids.empty() ? s.eos_ids : s.gen_eos_ids)},
              {"transformers_version", "4.50.0"}};
  write_file_atomic((fs::path(dir) / "generation_config.json").string(), gen.dump(2));
}

std::string random_hf_checkpoint(const std::string& tag, const RandomSpec& spec) {
  std::string dir = temp_dir(tag);
  write_random_hf_checkpoint(dir, spec);
  return dir;
}

}  // namespace mtp::test
