// A Gemma 4 text decoder in libtorch (Gemma4ForCausalLM): the training-side
// twin of model::Model for the Gemma 4 checkpoints `mtpspec pretrain --arch
// gemma4` writes — per-layer embeddings, K/V sharing, sliding and full layers
// with their own head widths and RoPE (default on sliding layers,
// proportional on full ones), q/k norms and the weightless V norm, the layer
// scalar, GELU-tanh, the double-wide MLP of the sharing layers, the tied head
// with the final soft-cap.
//
// Computes exactly the engine's function (model/forward.cc Model::forward and
// per_layer_inputs, model/block.cc): every layer is train::decoder_layer —
// the code the MTP modules are trained with — and the RoPE tables come from
// the engine's own model::Rope.
// Internal to the train layer (torch types).
#pragma once
#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/config.h"
#include "model/pretrain_options.h"
#include "train/pretrain_target.h"

namespace mtp::train {

// config.json of the tiny Gemma 4 of a pretraining preset (Gemma4TextConfig
// keys, as transformers writes them): the preset's width, heads, head_dim
// and MLP width; at least 4 layers, counted from the last: full, sliding,
// sliding, full, ... (the last layer full, as Gemma 4 requires); the last
// max(2, layers / 3) layers read the K/V of earlier ones — a sliding and a
// full one, so both kinds own and share — with double-wide MLPs; full layers
// with twice the head width and proportional RoPE (a quarter of the pairs
// rotated, theta 1e6), sliding ones with default RoPE (theta 1e4) over a
// window of a quarter of the context; per-layer embeddings of half the head
// width; the final soft-cap 30; tied embeddings.
nlohmann::json gemma4_pretrain_config(const model::PretrainPreset& p, int vocab, int bos, int eos,
                                      int max_position);

// Every tensor of a Gemma 4 checkpoint of config c, with its shape: the
// embedding, the per-layer embedding table with its projection and norm,
// the layers (model/layer_io.h: their kinds), the final norm; no lm_head (tied).
model::TensorShapes gemma4_tensor_shapes(const model::ModelConfig& c);

// Every layer's per-layer-embedding input (Model::per_layer_inputs): x [B, R,
// d] the layer-0 input, tok [B, R, L·e] the rows of the per-layer token table
// × ple_embed_scale, proj [L·e, d] per_layer_model_projection, norm [e]
// per_layer_projection_norm as applied -> [B, R, L, e]. The pretraining module
// and the libtorch target (train/torch_target.h) both compute it here.
torch::Tensor gemma4_per_layer_inputs(const model::ModelConfig& c, const torch::Tensor& proj,
                                      const torch::Tensor& norm, const torch::Tensor& tok,
                                      const torch::Tensor& x);

class TorchGemma4 final : public PretrainTarget {
 public:
  // c: a tied Gemma 4 config (ConfigError otherwise).
  TorchGemma4(const model::ModelConfig& c, torch::Device dev);

  // init_flat_params (train/pretrain_target.h) with per_layer_projection counted
  // as a residual projection.
  std::vector<float> init_params(uint64_t seed) const override;

  torch::Tensor forward(const std::vector<torch::Tensor>& params,
                        const torch::Tensor& tokens) const override;

 private:
  struct Tables {
    RopeTables global, local;
    torch::Tensor full_mask, sliding_mask;  // [R, R] bool, true = masked
  };
  const Tables& tables(int64_t R) const;
  // [B, R, L, ple_dim]: Model::per_layer_inputs.
  torch::Tensor per_layer_inputs(const std::vector<torch::Tensor>& p, const torch::Tensor& tokens,
                                 const torch::Tensor& x) const;

  model::Rope rope_;
  mutable std::map<int64_t, Tables> cache_;  // R -> tables
};

}  // namespace mtp::train
