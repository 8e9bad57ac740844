// A Llama-architecture decoder in libtorch: the training-side twin of
// model::Model for the checkpoints `mtpspec pretrain` writes (LlamaForCausalLM:
// SiLU gated MLP, RMSNorm, rotate-half RoPE, untied lm_head, optional GQA).
//
// Computes exactly the engine's function (model/forward.cc + model/block.cc):
// the decoder layers are train::decoder_layer, the code the MTP modules are
// trained with, and the RoPE tables come from the engine's own model::Rope.
// Parameters live in one flat fp32 vector (FlatLayout: the Hugging Face tensor
// names and shapes load_hf expects, sorted by name), like the drafter's.
// Internal to the train layer (torch types).
#pragma once
#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/config.h"
#include "train/torch_mtp.h"

namespace mtp::train {

// Every tensor of a Llama checkpoint of config c, with its shape: the
// embedding, the layers (model/layer_io.h), the final norm, the lm_head (untied).
model::TensorShapes llama_tensor_shapes(const model::ModelConfig& c);

class TorchLlama {
 public:
  // c: an untied Llama config (ConfigError otherwise).
  TorchLlama(const model::ModelConfig& c, torch::Device dev);

  const model::ModelConfig& config() const { return c_; }
  const FlatLayout& layout() const { return layout_; }
  torch::Device device() const { return dev_; }

  // Initial weights as one flat vector (host): matrices and the embedding
  // N(0, 0.02), the residual projections (o_proj, down_proj) N(0, 0.02/√(2L))
  // (GPT-2), norms 1. A pure function of the seed (std::mt19937_64).
  std::vector<float> init_params(uint64_t seed) const;

  // A flat tensor on the device from host values (size checked).
  torch::Tensor to_flat(const std::vector<float>& values) const {
    return layout_.to_flat(values, dev_);
  }

  // tokens: [B, R] int64 on the device, positions 0..R-1 -> logits [B, R, V].
  // params: layout().views() of a flat parameter vector.
  torch::Tensor forward(const std::vector<torch::Tensor>& params,
                        const torch::Tensor& tokens) const;

 private:
  torch::Tensor param(const std::vector<torch::Tensor>& p, const std::string& name) const;

  model::ModelConfig c_;
  torch::Device dev_;
  FlatLayout layout_;
  model::Rope rope_;
  mutable std::map<int64_t, RopeTables> rope_cache_;  // R -> cos, sin
  mutable std::map<int64_t, torch::Tensor> mask_cache_;
};

}  // namespace mtp::train
