#include "assistant_util.h"

#include <cstring>
#include <filesystem>
#include <random>

#include "core/mapped_file.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::test {

RandomSpec assistant_target_spec(int vocab) {
  RandomSpec s = RandomSpec::for_arch(model::Arch::Gemma4);
  s.vocab = vocab;
  s.eos_ids = {};
  s.bos_id = 2;
  return s;
}

json assistant_config_json(const RandomSpec& t, const AssistantSpec& a) {
  const json target = hf_config_json(t);
  json text = {
      {"model_type", "gemma4_text"},
      {"hidden_size", a.hidden},
      {"intermediate_size", a.ffn},
      {"num_hidden_layers", int(a.layer_types.size())},
      {"num_attention_heads", a.n_heads},
      {"num_key_value_heads", t.n_kv_heads},
      {"head_dim", t.head_dim},
      {"global_head_dim", t.global_head_dim > 0 ? t.global_head_dim : t.head_dim},
      {"attention_k_eq_v", t.k_eq_v},
      {"num_global_key_value_heads", target.at("num_global_key_value_heads")},
      {"num_kv_shared_layers", int(a.layer_types.size())},
      {"hidden_size_per_layer_input", 0},
      {"vocab_size_per_layer_input", 0},
      {"use_double_wide_mlp", false},
      {"enable_moe_block", false},
      {"vocab_size", t.vocab},
      {"sliding_window", a.sliding_window > 0 ? a.sliding_window : t.sliding_window},
      {"layer_types", a.layer_types},
      {"rope_parameters", target.at("rope_parameters")},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"rms_norm_eps", 1e-6},
      // The assistant's head applies no soft-cap whatever its text_config says.
      {"final_logit_softcapping", 30.0},
      {"max_position_embeddings", t.max_position},
      {"tie_word_embeddings", true},
      {"attention_bias", false},
      {"use_bidirectional_attention", nullptr},
      {"pad_token_id", 0},
      {"bos_token_id", 2},
      {"eos_token_id", 1}};
  json c = {{"architectures", {"Gemma4AssistantForCausalLM"}},
            {"model_type", "gemma4_assistant"},
            {"backbone_hidden_size", t.d_model},
            {"use_ordered_embeddings", a.ordered},
            {"num_centroids", a.centroids},
            {"centroid_intermediate_top_k", a.top_k},
            {"tie_word_embeddings", a.tie},
            {"dtype", a.dtype == DType::BF16 ? "bfloat16" : "float32"},
            {"transformers_version", "5.0.0"},
            {"text_config", text}};
  if (!a.config_patch.is_null()) c.merge_patch(a.config_patch);
  return c;
}

void write_random_assistant(const std::string& dir, const RandomSpec& t, const AssistantSpec& a) {
  fs::create_directories(dir);
  const int64_t h = a.hidden, V = t.vocab, B = t.d_model;
  RandomSpec values = t;  // random_tensor_values' roles and scales, the assistant's seed
  values.seed = a.seed;
  std::vector<std::pair<std::string, std::vector<int64_t>>> spec;
  spec.push_back({"model.embed_tokens.weight", {V, h}});
  for (size_t i = 0; i < a.layer_types.size(); ++i) {
    const bool full = a.layer_types[i] == "full_attention";
    const int64_t hd = full && t.global_head_dim > 0 ? t.global_head_dim : t.head_dim;
    const int64_t q = int64_t(a.n_heads) * hd;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm", "post_attention_layernorm",
                          "pre_feedforward_layernorm", "post_feedforward_layernorm"}) {
      spec.push_back({p + n + ".weight", {h}});
    }
    spec.push_back({p + "self_attn.q_proj.weight", {q, h}});
    spec.push_back({p + "self_attn.q_norm.weight", {hd}});
    spec.push_back({p + "self_attn.o_proj.weight", {h, q}});
    spec.push_back({p + "mlp.gate_proj.weight", {a.ffn, h}});
    spec.push_back({p + "mlp.up_proj.weight", {a.ffn, h}});
    spec.push_back({p + "mlp.down_proj.weight", {h, a.ffn}});
    spec.push_back({p + "layer_scalar", {1}});
  }
  spec.push_back({"model.norm.weight", {h}});
  if (!a.tie) spec.push_back({"lm_head.weight", {V, h}});
  spec.push_back({"pre_projection.weight", {h, 2 * B}});
  spec.push_back({"post_projection.weight", {B, h}});
  if (a.ordered) spec.push_back({"masked_embedding.centroids.weight", {a.centroids, h}});
  for (auto& e : a.extra_tensors) spec.push_back(e);

  struct Stored {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    std::vector<uint8_t> bytes;
  };
  std::vector<Stored> tensors;
  for (auto& [name, shape0] : spec) {
    std::vector<int64_t> shape = shape0;
    std::vector<float> v = random_tensor_values(values, name, shape);
    if (a.edit) a.edit(name, shape, v);
    if (shape.empty()) continue;
    tensors.push_back({name, shape, a.dtype, stored_bytes(v, a.dtype)});
  }
  if (a.ordered) {
    std::vector<int64_t> ord = a.ordering;
    if (ord.empty()) {  // Fisher-Yates with mt19937 (specified bit for bit)
      for (int64_t i = 0; i < V; ++i) ord.push_back(i);
      std::mt19937 rng(uint32_t(a.seed));
      for (int64_t i = V - 1; i > 0; --i) std::swap(ord[size_t(i)], ord[size_t(rng() % uint32_t(i + 1))]);
    }
    std::vector<uint8_t> bytes(ord.size() * 8);
    std::memcpy(bytes.data(), ord.data(), bytes.size());
    tensors.push_back({"masked_embedding.token_ordering", {int64_t(ord.size())}, DType::I64, bytes});
  }
  std::vector<io::TensorView> views;
  for (const Stored& s : tensors) views.push_back({s.name, s.dtype, s.shape, s.bytes.data(), s.bytes.size()});
  io::write_safetensors((fs::path(dir) / "model.safetensors").string(), views, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), assistant_config_json(t, a).dump(2));
}

std::string random_assistant(const std::string& tag, const RandomSpec& target,
                             const AssistantSpec& a) {
  const std::string dir = temp_dir(tag);
  write_random_assistant(dir, target, a);
  return dir;
}

}  // namespace mtp::test
