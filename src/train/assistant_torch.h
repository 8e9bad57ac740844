// Gemma 4's assistant in libtorch: the training-side twin of
// drafter::AssistantRunner (docs/SEMANTICS.md "Gemma 4's assistant"), with
// autograd, over every position of a sequence at once:
//
//   row t (position t, t >= 1) of step 1 of the cycle with N = t + 1 committed:
//     x      = pre_projection · [target.embed(tok[t]); state[t]]
//              state[t] = the target's post-norm hidden at t - 1
//     x      = the assistant's layers (train::decoder_layer: queries only),
//              each attending with the target's K/V of the layer it reads,
//              keys [first_key(kind, t), t - 1]
//     x̂      = final norm of x;  state' = post_projection · x̂
//     logits = the full tied head of x̂ (the centroid head is the engine's
//              alone; the trainer scores every token)
//
// The target's pieces are the engine's: its embedding rows (Model::embed),
// its post-norm hidden and K/V from one engine forward (engine_capture), so
// the parity between this and the engine is over identical inputs.
// Parameters: one flat fp32 vector over assistant_tensor_shapes (the
// published names), read from and written to a gemma4_assistant directory.
// Internal to the train layer (torch types).
#pragma once
#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "drafter/gemma4_assistant.h"
#include "model/forward.h"
#include "train/torch_mtp.h"

namespace mtp::train {

// The target's side of one sequence of R tokens, as the engine computes it:
// its post-norm hidden [1, R, d] of positions 0..R-1, its next-token argmax
// at each position [R] (what the assistant's row t is trained to draft), and
// the K/V of every target layer the assistant reads, [1, KV, R, hd] each
// (after norm and RoPE, as the cache holds them).
struct AssistantCapture {
  torch::Tensor post_norm;
  std::vector<int32_t> target_argmax;
  std::map<int, std::pair<torch::Tensor, torch::Tensor>> kv;
};
// The post-norm capture (train/post_norm_capture.h) of tokens, as tensors on dev.
AssistantCapture engine_capture(const model::Model& target, const drafter::AssistantConfig& a,
                                const std::vector<int32_t>& tokens, torch::Device dev,
                                ThreadPool* pool = nullptr);

class TorchAssistant {
 public:
  TorchAssistant(const model::Model& target, const drafter::AssistantConfig& a, torch::Device dev);

  const FlatLayout& layout() const { return layout_; }
  const drafter::AssistantConfig& config() const { return a_; }

  // The target's embedding rows of tokens [R] -> [1, R, backbone].
  torch::Tensor embed(const std::vector<int32_t>& tokens) const;

  // One draft step for rows t = 0..R-1 (row t at position t; row 0 has no
  // key and attends key 0: its outputs are not the engine's and unused):
  // e, state [B, R, backbone]; kv as AssistantCapture::kv. Returns logits
  // [B, R, vocab] and state' [B, R, backbone].
  std::pair<torch::Tensor, torch::Tensor> step(
      const std::vector<torch::Tensor>& params, const torch::Tensor& e,
      const torch::Tensor& state,
      const std::map<int, std::pair<torch::Tensor, torch::Tensor>>& kv) const;

  // Step 1's state of every row: state[t] = post_norm[t - 1] (row 0: zeros).
  static torch::Tensor step1_state(const torch::Tensor& post_norm);

  // Draft steps 1..K of every row t (the chain of N = t + 1 committed
  // tokens), carried as the engine's runner carries them: step 1 from
  // tokens[t] and step1_state; step j > 1 from step j - 1's state' and the
  // token feed[j - 2][t] ([R] each: the committed text's tokens[t + j - 1]
  // when training, the engine's own drafts in the parity gate), at the SAME
  // position t and keys [.., t - 1] as step 1 (the drafted tokens have no
  // K/V). step_shift != 0 plants the mistake of advancing the position per
  // draft (step j at position t + (j - 1)·step_shift, its keys with it; rows
  // shifted past the end wrap): only for tests, which the gate must fail.
  // Returns each step's logits [1, R, vocab].
  std::vector<torch::Tensor> chain(const std::vector<torch::Tensor>& params,
                                   const std::vector<int32_t>& tokens,
                                   const AssistantCapture& cap,
                                   const std::vector<std::vector<int32_t>>& feed,
                                   int step_shift = 0) const;

  // The flat parameters of a gemma4_assistant directory (its tensors as
  // fp32, by name; ShapeError / FormatError as the engine's loader).
  std::vector<float> read_dir(const std::string& dir) const;
  // A gemma4_assistant directory others load as Google's: `config` (the
  // assistant's config.json object) and model.safetensors (fp32, the
  // published names, token_ordering when the config has the centroid head:
  // `ordering`, else none).
  void write_dir(const std::string& dir, const nlohmann::json& config,
                 const std::vector<float>& flat, const std::vector<int32_t>& ordering = {}) const;

 private:
  torch::Tensor param(const std::vector<torch::Tensor>& p, const std::string& name) const {
    return p.at(layout_.index(name));
  }
  // [R, R] bool, true = masked: row t sees keys [first_key(kind, t), t - 1].
  torch::Tensor mask(int64_t R, bool sliding) const;

  const model::Model& m_;
  drafter::AssistantConfig a_;
  torch::Device dev_;
  FlatLayout layout_;
  model::Rope rope_;
};

}  // namespace mtp::train
