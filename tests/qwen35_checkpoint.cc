// The Qwen3.5 parts of the random checkpoint writer (checkpoint_util.cc):
// Qwen3_5TextConfig's keys, the nested Qwen3_5ForConditionalGeneration
// layout, each layer's tensors.
#include "qwen35_checkpoint.h"

namespace mtp::test {

using nlohmann::json;

void qwen35_config(const RandomSpec& s, json& c) {
  c["architectures"] = {"Qwen3_5ForCausalLM"};
  c["model_type"] = "qwen3_5_text";
  c["head_dim"] = s.head_dim;
  c["hidden_act"] = "silu";
  c["attention_bias"] = false;
  c["attn_output_gate"] = true;
  std::vector<std::string> types;
  for (int i = 0; i < s.n_layers; ++i) {
    types.push_back(qwen35_linear(s, i) ? "linear_attention" : "full_attention");
  }
  c["layer_types"] = types;
  c["full_attention_interval"] = s.full_attention_interval;
  c["linear_conv_kernel_dim"] = s.conv_kernel;
  c["linear_num_key_heads"] = s.lin_k_heads;
  c["linear_num_value_heads"] = s.lin_v_heads;
  c["linear_key_head_dim"] = s.lin_k_dim;
  c["linear_value_head_dim"] = s.lin_v_dim;
  c["mamba_ssm_dtype"] = "float32";
  c["mtp_num_hidden_layers"] = s.mtp ? 1 : 0;
  c["mtp_use_dedicated_embeddings"] = false;
  // Text positions are equal on the three mrope rows: the sections
  // (summing to the rotated pairs) do not change the result.
  const int pairs = int(float(s.head_dim) * s.partial_rotary) / 2;
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", s.rope_theta},
                          {"partial_rotary_factor", s.partial_rotary},
                          {"mrope_interleaved", true},
                          {"mrope_section", {pairs - 2 * (pairs / 3), pairs / 3, pairs / 3}}};
  c.erase("rope_theta");
  c["pad_token_id"] = nullptr;
}

json qwen35_nested_config(const RandomSpec& s, const json& c) {
  // Qwen3_5ForConditionalGeneration: the text model under text_config
  // (with its special tokens), the vision tower's config, the tie flag.
  json text = c;
  for (const char* k : {"architectures", "torch_dtype", "transformers_version",
                        "tie_word_embeddings"}) {
    text.erase(k);
  }
  if (!s.config_patch.is_null()) text.merge_patch(s.config_patch);
  json top;
  top["architectures"] = {"Qwen3_5ForConditionalGeneration"};
  top["model_type"] = "qwen3_5";
  top["text_config"] = text;
  top["vision_config"] = {{"model_type", "qwen3_5"}, {"depth", 1}, {"hidden_size", 8},
                          {"intermediate_size", 16}, {"num_heads", 2}, {"out_hidden_size", s.d_model},
                          {"patch_size", 2}, {"temporal_patch_size", 2},
                          {"spatial_merge_size", 1}, {"num_position_embeddings", 4}};
  top["image_token_id"] = 5;
  top["video_token_id"] = 6;
  top["vision_start_token_id"] = 7;
  top["vision_end_token_id"] = 8;
  top["tie_word_embeddings"] = s.tie;
  top["torch_dtype"] = c["torch_dtype"];
  top["transformers_version"] = "5.5.0";
  return top;
}

bool qwen35_linear(const RandomSpec& s, int i) {
  return s.layer_types.empty() ? (i + 1) % s.full_attention_interval != 0
                               : s.layer_types[size_t(i)] == "linear_attention";
}

void qwen35_layer_tensors(const RandomSpec& s, const std::string& p, bool linear,
                          std::vector<std::pair<std::string, std::vector<int64_t>>>& spec) {
  const int64_t d = s.d_model, hd = s.head_dim, q = int64_t(s.n_heads) * hd;
  const int64_t kv = int64_t(s.n_kv_heads) * hd;
  spec.push_back({p + "input_layernorm.weight", {d}});
  if (linear) {
    const int64_t key = int64_t(s.lin_k_heads) * s.lin_k_dim, val = int64_t(s.lin_v_heads) * s.lin_v_dim;
    const int64_t C = 2 * key + val, hv = s.lin_v_heads;
    spec.push_back({p + "linear_attn.in_proj_qkv.weight", {C, d}});
    spec.push_back({p + "linear_attn.in_proj_z.weight", {val, d}});
    spec.push_back({p + "linear_attn.in_proj_b.weight", {hv, d}});
    spec.push_back({p + "linear_attn.in_proj_a.weight", {hv, d}});
    spec.push_back({p + "linear_attn.conv1d.weight", {C, 1, s.conv_kernel}});
    spec.push_back({p + "linear_attn.dt_bias", {hv}});
    spec.push_back({p + "linear_attn.A_log", {hv}});
    spec.push_back({p + "linear_attn.norm.weight", {s.lin_v_dim}});
    spec.push_back({p + "linear_attn.out_proj.weight", {d, val}});
  } else {
    spec.push_back({p + "self_attn.q_proj.weight", {2 * q, d}});
    spec.push_back({p + "self_attn.k_proj.weight", {kv, d}});
    spec.push_back({p + "self_attn.v_proj.weight", {kv, d}});
    spec.push_back({p + "self_attn.o_proj.weight", {d, q}});
    spec.push_back({p + "self_attn.q_norm.weight", {hd}});
    spec.push_back({p + "self_attn.k_norm.weight", {hd}});
  }
  spec.push_back({p + "post_attention_layernorm.weight", {d}});
  spec.push_back({p + "mlp.gate_proj.weight", {s.ffn, d}});
  spec.push_back({p + "mlp.up_proj.weight", {s.ffn, d}});
  spec.push_back({p + "mlp.down_proj.weight", {d, s.ffn}});
}


}  // namespace mtp::test
