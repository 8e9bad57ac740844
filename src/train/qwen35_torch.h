// A Qwen3.5 dense text decoder in libtorch (Qwen3_5ForCausalLM) with its
// native multi-token-prediction head (mtp.*): the training-side twin of
// model::Model and drafter::NativeHead for the checkpoints `mtpspec pretrain
// --arch qwen35` writes.
//
// Trunk (transformers' Qwen3_5TextModel, read not copied):
//   Gated DeltaNet layers (linear_attention): in_proj_qkv / in_proj_z /
//     in_proj_b / in_proj_a, the causal depthwise conv (zero history at
//     position 0) + silu, L2-normalised q and k (q also / √k_dim), value head
//     h reading key head h / (v_heads / k_heads), g = -exp(A_log) ·
//     softplus(a + dt_bias), beta = sigmoid(b), the delta rule one token at a
//     time (model/delta_rule.h's order of operations), the gated RMSNorm
//     rmsnorm(o) · w · silu(z) (plain w), out_proj;
//   gated full-attention layers: train::decoder_layer (sigmoid output gate,
//     q/k norms, partial rotary from the engine's model::Rope, GQA);
//   every other norm x̂ · (1 + w); the head tied or lm_head as the config says.
// Native head (drafter/native_head.h): row t embeds token t + 1, reads the
// trunk's hidden AFTER the final norm at t, and predicts token t + 2:
//   out_t = norm(layer(fc · [norm_e(embed(tok[t+1])); norm_h(h_t)]))
// with one full-attention layer (native_mtp_config) causal over the rows,
// logits through the shared head.
// Internal to the train layer (torch types).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/config.h"
#include "model/pretrain_options.h"
#include "train/pretrain_target.h"

namespace mtp::train {

// Weight of the native head's next-next-token cross-entropy in the
// pretraining loss (DeepSeek-V3's λ for its MTP modules; Qwen3.5's own is
// unpublished). Its gradient reaches the trunk, the embedding and the head,
// as in joint training.
inline constexpr double kQwen35MtpLossWeight = 0.3;

// config.json of the tiny Qwen3.5 of a pretraining preset (Qwen3_5TextConfig
// keys): the preset's width, heads, head_dim and MLP width; layer i full
// attention when (i + 1) % 4 == 0 or it is the last, Gated DeltaNet
// otherwise, with max(1, kv heads) key heads and `heads` value heads of the
// preset's head width, conv kernel 4; partial rotary 0.25 (theta 1e7), eps
// 1e-6, tied embeddings, one MTP layer (mtp_num_hidden_layers 1).
nlohmann::json qwen35_pretrain_config(const model::PretrainPreset& p, int vocab, int bos, int eos,
                                      int max_position);

// Every tensor of a Qwen3.5 checkpoint of config c, with its shape: the
// embedding, the layers (model/layer_io.h), the final norm, lm_head when
// untied, and the native head's mtp.* when c.mtp_layers > 0.
model::TensorShapes qwen35_tensor_shapes(const model::ModelConfig& c);

// The native head over rows t = 0..R-1 at positions 0..R-1 (the training
// side of drafter::NativeHead): e [B, R, d] the target's embedding of the
// token each row embeds, hidden [B, R, d] the target's post-norm hidden ->
// out [B, R, d] after mtp.norm (logits: the target's head on out). weight:
// the head's tensors by their names ("mtp.fc.weight", ...), norms as stored
// (1 + w applied here); mtp_cfg: model::native_mtp_config of the target's;
// rope: tables of mtp_cfg.rotary_dim(head_dim) dims; mask [R, R].
torch::Tensor native_head_forward(const model::ModelConfig& mtp_cfg,
                                  const std::function<torch::Tensor(const std::string&)>& weight,
                                  const torch::Tensor& e, const torch::Tensor& hidden,
                                  const RopeTables& rope, const torch::Tensor& mask);

// A Gated DeltaNet's recurrent state over B sequences (the libtorch target's
// cache, train/torch_target.h): conv [B, C, kernel - 1] the last kernel - 1
// inputs of the causal conv (zeros before position 0), S [B, v_heads, k_dim,
// v_dim] the delta rule's state (zeros at position 0).
struct DeltaState {
  torch::Tensor conv, S;
};

// One Gated DeltaNet over x [B, R, d] (after input_layernorm) -> [B, R, d],
// the rows consecutive tokens. weight(name): the layer's linear_attn tensors
// by their Hugging Face names ("in_proj_qkv.weight", "conv1d.weight" [C, 1,
// kernel], "dt_bias", "norm.weight", "out_proj.weight", ...), except "A_neg"
// = -exp(A_log) [v_heads] (as the engine holds it). state null: from zero
// history and state (pretraining); otherwise the rows continue `state`, which
// is updated in place to its value after them (decoding).
torch::Tensor gated_delta_net(const model::ModelConfig& c,
                              const std::function<torch::Tensor(const std::string&)>& weight,
                              const torch::Tensor& x, DeltaState* state = nullptr);

class TorchQwen35 final : public PretrainTarget {
 public:
  // c: a Qwen3.5 config with at most one MTP layer (ConfigError otherwise).
  TorchQwen35(const model::ModelConfig& c, torch::Device dev);

  // init_flat_params with out_proj as a residual projection, then Qwen3.5's
  // own: (1 + w) norms 0, the gated norm 1, dt_bias 1, A_log = log U(1, 16),
  // conv taps U(±1/√kernel).
  std::vector<float> init_params(uint64_t seed) const override;

  torch::Tensor forward(const std::vector<torch::Tensor>& params,
                        const torch::Tensor& tokens) const override;

  // Next-token CE + kQwen35MtpLossWeight · the head's next-next-token CE.
  Loss training_loss(const std::vector<torch::Tensor>& params,
                     const torch::Tensor& w) const override;

  bool has_mtp() const { return c_.mtp_layers > 0; }
  // tokens [B, R] -> the trunk's hidden after the final norm [B, R, d].
  torch::Tensor trunk(const std::vector<torch::Tensor>& p, const torch::Tensor& tokens) const;
  // [..., d] -> logits [..., V] through the (shared) head.
  torch::Tensor head(const std::vector<torch::Tensor>& p, const torch::Tensor& h) const;
  // The native head over rows t = 0..R-1 at positions 0..R-1: next [B, R]
  // the tokens each row embeds, hidden [B, R, d] post-norm -> out [B, R, d]
  // (after mtp.norm; logits = head(out)).
  torch::Tensor mtp(const std::vector<torch::Tensor>& p, const torch::Tensor& next,
                    const torch::Tensor& hidden) const;

 private:
  torch::Tensor norm(const std::vector<torch::Tensor>& p, const std::string& name,
                     const torch::Tensor& x) const;  // x̂ · (1 + w)
  struct Tables {
    RopeTables rope;
    torch::Tensor mask;  // [R, R] bool, true = masked
  };
  const Tables& tables(int64_t R) const;

  model::ModelConfig mtp_cfg_;  // model::native_mtp_config(c)
  model::Rope rope_;
  mutable std::map<int64_t, Tables> cache_;  // R -> tables
};

}  // namespace mtp::train
