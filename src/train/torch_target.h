// The target in libtorch: the engine's function (model/forward.cc) for the
// online capture on the training device, for every family the engine loads —
// Llama (llama3 RoPE scaling included: the engine's own model::Rope tables),
// Qwen2, Qwen3, Mistral, Gemma 2, Gemma 3, Gemma 4 (per-layer embeddings,
// shared K/V, both layer kinds, proportional RoPE, V norm, layer scalars:
// train::decoder_layer and gemma4_per_layer_inputs, the code the pretraining
// module runs) and Qwen3.5 (Gated DeltaNet: train::gated_delta_net; gated
// attention with partial rotary: decoder_layer).
//
// The weights are the engine's as loaded (kernels::PackedMatrix::row_f32: a
// quantized target's exact dequantized values; norms with Gemma's 1 + w
// already added; Qwen3.5's -exp(A_log)), so the function is the served one;
// the difference is the arithmetic: fp32 on the CPU (summation order only),
// bf16 autocast on CUDA.
// The capture is the residual after the last layer, before the final norm
// (invariant 2). capture_gap measures it against the engine's, position by
// position, with a tolerance derived from the dimensions and the unit
// roundoff of the arithmetic (torch_target.cc); tests/train/torch_target_test.cc
// checks it per family and that the post-norm hidden and the penultimate
// layer's output fail it.
//
// Self-distillation decodes with a cache (Cache: K/V of the layers that own
// theirs — a layer sharing another's reads its owner's — and the Gated
// DeltaNet layers' recurrent state), one token per step for every sequence of
// the batch, the tokens chosen on the host by the caller's rule (the same
// Sampler as the engine's); the capture of the final sequences is one forward
// over them.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/forward.h"
#include "train/online_data.h"
#include "train/qwen35_torch.h"
#include "train/torch_mtp.h"

namespace mtp::train {

class TorchTarget {
 public:
  // Copies the engine's weights to `dev` (matrices bf16 on CUDA, fp32 on the CPU).
  TorchTarget(const model::Model& m, torch::Device dev);
  ~TorchTarget();

  const model::Model& engine() const { return m_; }
  torch::Device device() const { return dev_; }
  // Unit roundoff of the arithmetic: 2^-24 (fp32) or 2^-8 (bf16 autocast).
  double unit_roundoff() const;

  struct Cache {
    int64_t T = 0;                   // positions the K/V hold
    std::vector<LayerKV> layers;     // [layer] k, v [B, KV_l, T, hd_l] fp32 (K/V owners)
    std::vector<DeltaState> state;   // [layer] Gated DeltaNet layers (zeros: position 0)
    // Sequence b's entries (views: writes reach this cache).
    Cache slice(int64_t b) const;
  };
  Cache make_cache(int64_t B, int64_t T) const;
  // Whether some layer is recurrent (Gated DeltaNet): its rows must continue
  // the cache's state (below).
  bool recurrent() const { return lc_.has_recurrent(); }

  // Rows tokens [B, R] (int64, host) at positions pos [B, R] (int64, host)
  // through the first `layers` layers (-1 = all: the capture) -> the residual
  // [B, R, d] fp32 on the device; their K/V and recurrent state written to
  // `cache`. A recurrent layer reads no positions: each sequence's rows are
  // the tokens right after those its state has consumed, in order.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& pos, Cache& cache,
                        int layers = -1) const;
  // Final norm + lm_head + soft-cap: [N, d] -> [N, V] fp32.
  torch::Tensor logits(const torch::Tensor& h) const;

  // The capture [n, d] of one sequence (positions 0..n-1), on the host.
  std::vector<float> capture(const std::vector<int32_t>& tokens, int layers = -1) const;

 private:
  struct Weights;
  torch::Tensor embed(const torch::Tensor& tokens) const;  // [B, R] -> [B, R, d] on the device
  // Per-layer embedding inputs [B, R, L, e] of tokens [B, R] with layer-0 input x.
  torch::Tensor per_layer_inputs(const torch::Tensor& tokens, const torch::Tensor& x) const;
  // cos, sin [B, R, 1, width/2] at positions p [B, R] (device).
  RopeTables rope_at(bool local, int64_t width, const torch::Tensor& p, int64_t T) const;

  const model::Model& m_;
  torch::Device dev_;
  model::ModelConfig lc_;  // the layers' config: norms as the engine holds them (1 + w added)
  std::unique_ptr<Weights> w_;
};

// The capture of a TorchTarget against the engine's on the same tokens.
struct CaptureGap {
  double max_abs = 0;   // max |torch - engine| over positions and dimensions
  double tol = 0;       // C · L · u · √n · max|h_engine| (torch_target.cc)
  double ref = 0;       // max |h_engine|
  long positions = 0;
  bool within() const { return max_abs <= tol; }
  nlohmann::json to_json() const;
};
// `torch_capture`: the torch side's capture of `tokens` ([n, d]; a negative
// control may pass another hidden); the engine's is computed here.
CaptureGap capture_gap(const TorchTarget& t, const std::vector<int32_t>& tokens,
                       const std::vector<float>& torch_capture);

// The online capture through a TorchTarget (TargetCapture for OnlineData).
std::unique_ptr<TargetCapture> torch_capture(const model::Model& m, torch::Device dev);

}  // namespace mtp::train
