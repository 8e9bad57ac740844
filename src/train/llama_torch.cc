#include "train/llama_torch.h"

#include "core/error.h"
#include "model/layer_io.h"

namespace mtp::train {

namespace {
std::string layer_prefix(int i) { return "model.layers." + std::to_string(i) + "."; }
}  // namespace

model::TensorShapes llama_tensor_shapes(const model::ModelConfig& c) {
  const int64_t d = c.d_model, v = c.vocab;
  model::TensorShapes t = {{"model.embed_tokens.weight", {v, d}}};
  for (int i = 0; i < c.n_layers; ++i) {
    for (auto& x : model::layer_tensor_shapes(c, layer_prefix(i))) t.push_back(std::move(x));
  }
  t.push_back({"model.norm.weight", {d}});
  t.push_back({"lm_head.weight", {v, d}});
  return t;
}

TorchLlama::TorchLlama(const model::ModelConfig& c, torch::Device dev)
    : PretrainTarget(c, dev, FlatLayout::from_shapes(llama_tensor_shapes(c))), rope_(c) {
  if (c.arch != model::Arch::Llama || c.tie_embeddings || c.rope_interleaved) {
    fail<ConfigError>("pretraining builds untied Hugging Face Llama models only (got {}{}{})",
                      model::arch_name(c.arch), c.tie_embeddings ? ", tied embeddings" : "",
                      c.rope_interleaved ? ", interleaved RoPE" : "");
  }
}

std::vector<float> TorchLlama::init_params(uint64_t seed) const {
  return init_flat_params(layout_, c_.n_layers, seed, {"o_proj.weight", "down_proj.weight"});
}

torch::Tensor TorchLlama::forward(const std::vector<torch::Tensor>& p,
                                  const torch::Tensor& tokens) const {
  TORCH_CHECK(tokens.dim() == 2, "TorchLlama::forward: tokens must be [B, R]");
  const int64_t R = tokens.size(1);
  auto rope = rope_cache_.find(R);
  if (rope == rope_cache_.end()) {
    rope = rope_cache_.emplace(R, rope_tables(rope_, false, R, c_.head_dim, dev_)).first;
    mask_cache_[R] = causal_mask(R, 0, dev_);
  }
  torch::Tensor x = torch::embedding(param(p, "model.embed_tokens.weight"), tokens);  // [B, R, d]
  for (int i = 0; i < c_.n_layers; ++i) {
    const std::string pre = layer_prefix(i);
    x = decoder_layer(
        c_, [&](const std::string& n) { return param(p, pre + n); }, x, rope->second,
        mask_cache_.at(R));
  }
  return at::linear(rmsnorm(x, param(p, "model.norm.weight"), c_.norm_eps),
                    param(p, "lm_head.weight"));
}

}  // namespace mtp::train
