#include "train/gemma4_torch.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/layer_io.h"

namespace mtp::train {

namespace {
std::string layer_prefix(int i) { return "model.layers." + std::to_string(i) + "."; }
constexpr int kMinLayers = 4;
}  // namespace

nlohmann::json gemma4_pretrain_config(const model::PretrainPreset& p, int vocab, int bos, int eos,
                                      int max_position) {
  using nlohmann::json;
  const int layers = std::max(kMinLayers, p.n_layers);
  json types = json::array();
  for (int l = 0; l < layers; ++l) {
    types.push_back((layers - 1 - l) % 3 == 0 ? "full_attention" : "sliding_attention");
  }
  return {{"architectures", {"Gemma4ForCausalLM"}},
          {"model_type", "gemma4_text"},
          {"hidden_size", p.d_model},
          {"intermediate_size", p.ffn},
          {"num_hidden_layers", layers},
          {"num_attention_heads", p.n_heads},
          {"num_key_value_heads", p.n_kv_heads},
          {"head_dim", p.head_dim},
          {"global_head_dim", 2 * p.head_dim},
          {"num_global_key_value_heads", nullptr},
          {"attention_k_eq_v", false},
          {"layer_types", types},
          {"sliding_window", std::max(1, max_position / 4)},
          {"num_kv_shared_layers", std::max(2, layers / 3)},
          {"use_double_wide_mlp", true},
          {"hidden_size_per_layer_input", std::max(1, p.head_dim / 2)},
          {"vocab_size_per_layer_input", vocab},
          {"vocab_size", vocab},
          {"max_position_embeddings", max_position},
          {"rms_norm_eps", 1e-6},
          {"rope_parameters",
           {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
            {"full_attention",
             {{"rope_type", "proportional"},
              {"partial_rotary_factor", 0.25},
              {"rope_theta", 1000000.0}}}}},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"final_logit_softcapping", 30.0},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"enable_moe_block", false},
          {"use_bidirectional_attention", nullptr},
          {"tie_word_embeddings", true},
          {"pad_token_id", 0},
          {"bos_token_id", bos >= 0 ? json(bos) : json(nullptr)},
          {"eos_token_id", eos >= 0 ? json(eos) : json(nullptr)},
          {"initializer_range", 0.02},
          {"use_cache", true},
          {"torch_dtype", "float32"},
          {"transformers_version", "5.5.0"}};
}

model::TensorShapes gemma4_tensor_shapes(const model::ModelConfig& c) {
  const int64_t d = c.d_model, v = c.vocab, all = int64_t(c.n_layers) * c.ple_dim;
  model::TensorShapes t = {{"model.embed_tokens.weight", {v, d}}};
  if (c.ple_dim > 0) {
    t.push_back({"model.embed_tokens_per_layer.weight", {v, all}});
    t.push_back({"model.per_layer_model_projection.weight", {all, d}});
    t.push_back({"model.per_layer_projection_norm.weight", {c.ple_dim}});
  }
  for (int i = 0; i < c.n_layers; ++i) {
    for (auto& x : model::layer_tensor_shapes(c, layer_prefix(i), i)) t.push_back(std::move(x));
  }
  t.push_back({"model.norm.weight", {d}});
  return t;
}

TorchGemma4::TorchGemma4(const model::ModelConfig& c, torch::Device dev)
    : PretrainTarget(c, dev, FlatLayout::from_shapes(gemma4_tensor_shapes(c))), rope_(c) {
  if (c.arch != model::Arch::Gemma4 || !c.tie_embeddings) {
    fail<ConfigError>("the libtorch Gemma 4 builds tied Gemma 4 models only (got {}{})",
                      model::arch_name(c.arch), c.tie_embeddings ? "" : ", untied embeddings");
  }
}

std::vector<float> TorchGemma4::init_params(uint64_t seed) const {
  return init_flat_params(layout_, c_.n_layers, seed,
                          {"o_proj.weight", "down_proj.weight", "per_layer_projection.weight"});
}

const TorchGemma4::Tables& TorchGemma4::tables(int64_t R) const {
  auto it = cache_.find(R);
  if (it != cache_.end()) return it->second;
  // The head widths of the two kinds: Rope holds one table per kind.
  int global_hd = c_.head_dim, local_hd = c_.head_dim;
  for (int l = 0; l < c_.n_layers; ++l) {
    const model::LayerKind k = c_.layer_kind(l);
    (k.sliding ? local_hd : global_hd) = k.head_dim;
  }
  Tables t;
  t.global = rope_tables(rope_, false, R, global_hd, dev_);
  t.local = rope_tables(rope_, rope_.has_local(), R, local_hd, dev_);
  t.full_mask = causal_mask(R, 0, dev_);
  t.sliding_mask = causal_mask(R, c_.sliding_window, dev_);
  return cache_.emplace(R, std::move(t)).first->second;
}

torch::Tensor gemma4_per_layer_inputs(const model::ModelConfig& c, const torch::Tensor& proj,
                                      const torch::Tensor& norm, const torch::Tensor& tok,
                                      const torch::Tensor& x) {
  const int64_t B = x.size(0), R = x.size(1), L = c.n_layers, e = c.ple_dim;
  // transformers' Python-float constants, as fp32: hidden_size**-0.5, 2.0**-0.5.
  const float proj_scale = float(std::pow(double(c.d_model), -0.5));
  const float input_scale = float(std::pow(2.0, -0.5));
  auto p = rmsnorm((at::linear(x, proj) * proj_scale).view({B, R, L, e}), norm, c.norm_eps);
  return (p + tok.view({B, R, L, e})) * input_scale;
}

torch::Tensor TorchGemma4::per_layer_inputs(const std::vector<torch::Tensor>& p,
                                            const torch::Tensor& tokens,
                                            const torch::Tensor& x) const {
  auto tok =
      torch::embedding(param(p, "model.embed_tokens_per_layer.weight"), tokens) * c_.ple_embed_scale;
  return gemma4_per_layer_inputs(c_, param(p, "model.per_layer_model_projection.weight"),
                                 param(p, "model.per_layer_projection_norm.weight"), tok, x);
}

torch::Tensor TorchGemma4::forward(const std::vector<torch::Tensor>& p,
                                   const torch::Tensor& tokens) const {
  TORCH_CHECK(tokens.dim() == 2, "TorchGemma4::forward: tokens must be [B, R]");
  const Tables& t = tables(tokens.size(1));
  const torch::Tensor& embed = param(p, "model.embed_tokens.weight");
  torch::Tensor x = torch::embedding(embed, tokens) * c_.embed_scale;  // [B, R, d]
  torch::Tensor ple;
  if (c_.ple_dim > 0) ple = per_layer_inputs(p, tokens, x);  // [B, R, L, e]
  std::map<int, std::pair<torch::Tensor, torch::Tensor>> shared_kv;
  for (int i = 0; i < c_.n_layers; ++i) {
    const std::string pre = layer_prefix(i);
    const bool sliding = c_.is_sliding(i);
    LayerContext lc;
    lc.layer = i;
    lc.shared_kv = &shared_kv;
    if (c_.ple_dim > 0) lc.ple = ple.select(2, i);
    x = decoder_layer(
        c_, [&](const std::string& n) { return param(p, pre + n); }, x,
        sliding ? t.local : t.global, sliding ? t.sliding_mask : t.full_mask, lc);
  }
  torch::Tensor y = at::linear(rmsnorm(x, param(p, "model.norm.weight"), c_.norm_eps), embed);
  if (c_.final_softcap > 0) y = torch::tanh(y / c_.final_softcap) * c_.final_softcap;
  return y;
}

}  // namespace mtp::train
