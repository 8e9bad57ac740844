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
#include "train/pretrain_target.h"

namespace mtp::train {

// Every tensor of a Llama checkpoint of config c, with its shape: the
// embedding, the layers (model/layer_io.h), the final norm, the lm_head (untied).
model::TensorShapes llama_tensor_shapes(const model::ModelConfig& c);

class TorchLlama final : public PretrainTarget {
 public:
  // c: an untied Llama config (ConfigError otherwise).
  TorchLlama(const model::ModelConfig& c, torch::Device dev);

  // init_flat_params (train/pretrain_target.h): the residual projections are
  // o_proj and down_proj.
  std::vector<float> init_params(uint64_t seed) const override;

  torch::Tensor forward(const std::vector<torch::Tensor>& params,
                        const torch::Tensor& tokens) const override;

 private:

  model::Rope rope_;
  mutable std::map<int64_t, RopeTables> rope_cache_;  // R -> cos, sin
  mutable std::map<int64_t, torch::Tensor> mask_cache_;
};

}  // namespace mtp::train
