// A pretrainable target in libtorch: what `mtpspec pretrain` trains and the
// reference tests compare the engine with. One class per family
// (train/llama_torch.h, train/gemma4_torch.h, train/qwen35_torch.h), each computing exactly the
// engine's function (model/forward.cc + model/block.cc) with the layer code
// the MTP modules are trained with (train/torch_mtp.h decoder_layer).
// Parameters live in one flat fp32 vector (FlatLayout: the Hugging Face tensor
// names and shapes load_hf expects, sorted by name).
// Internal to the train layer (torch types).
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "train/torch_mtp.h"

namespace mtp::train {

class PretrainTarget {
 public:
  virtual ~PretrainTarget() = default;

  const model::ModelConfig& config() const { return c_; }
  const FlatLayout& layout() const { return layout_; }
  torch::Device device() const { return dev_; }

  // Initial weights as one flat vector (host); a pure function of the seed.
  virtual std::vector<float> init_params(uint64_t seed) const = 0;

  // tokens: [B, R] int64 on the device, positions 0..R-1 -> logits [B, R, V].
  // params: layout().views() of a flat parameter vector.
  virtual torch::Tensor forward(const std::vector<torch::Tensor>& params,
                                const torch::Tensor& tokens) const = 0;

  // The loss pretraining minimises over windows w [B, R + 1] (int64, device):
  // `total`, and with a native MTP head (Qwen3.5) its own term `mtp` (else
  // undefined). Default: next_token_loss.
  struct Loss {
    torch::Tensor total, mtp;
  };
  virtual Loss training_loss(const std::vector<torch::Tensor>& params, const torch::Tensor& w) const {
    return {next_token_loss(forward(params, w.narrow(1, 0, w.size(1) - 1)), w, 1), {}};
  }

  // Mean cross-entropy of logits [B, R', V] against the tokens `ahead` places
  // after each row's own: w[:, ahead .. ahead + R' - 1].
  static torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& w,
                                       int64_t ahead) {
    const int64_t R = logits.size(1);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                w.narrow(1, ahead, R).reshape(-1));
  }

  // A flat tensor on the device from host values (size checked).
  torch::Tensor to_flat(const std::vector<float>& values) const {
    return layout().to_flat(values, device());
  }

 protected:
  // layout: the family's tensors (its *_tensor_shapes(c)) in one flat vector.
  PretrainTarget(const model::ModelConfig& c, torch::Device dev, FlatLayout layout)
      : c_(c), dev_(dev), layout_(std::move(layout)) {}
  // The view of tensor `name` among layout().views() of a flat vector.
  torch::Tensor param(const std::vector<torch::Tensor>& p, const std::string& name) const {
    return p.at(layout_.index(name));
  }

  model::ModelConfig c_;
  torch::Device dev_;
  FlatLayout layout_;
};

// Initial weights of a target's flat layout (GPT-2): matrices and embeddings
// N(0, 0.02), the residual projections (names ending in one of `residual`)
// N(0, 0.02/√(2·layers)), norm weights and layer scalars 1. A pure function
// of the seed (std::mt19937_64, in layout order).
std::vector<float> init_flat_params(const FlatLayout& layout, int n_layers, uint64_t seed,
                                    const std::vector<std::string>& residual);

// The libtorch twin of a config `mtpspec pretrain` writes: Llama, Gemma 4 or
// Qwen3.5 (ConfigError for another family).
std::unique_ptr<PretrainTarget> make_pretrain_target(const model::ModelConfig& c, torch::Device dev);

}  // namespace mtp::train
