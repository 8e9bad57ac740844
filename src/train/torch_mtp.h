// The MTP modules in libtorch: the training-side twin of drafter::MtpRunner.
//
// Computes exactly the engine's function (drafter/mtp_runner.cc + model/block.cc),
// with autograd, over batches [B, R] of rows:
//   module k, row t (RoPE position t), inputs h_{k-1}[t] and e = embed(tok[t+k+1]):
//     h = round_to(hidden dtype, h)                      (k = 0 only: the capture contract)
//     x = eh_proj · [rmsnorm(e, enorm); rmsnorm(h, hnorm)]     order [e; h], [d, 2d]
//     x = one decoder layer of the target's family (block.cc), causal, optional window
//   logits = softcap(lm_head · rmsnorm(x, final_norm))   -> predicts tok[t+k+2]
// Embedding, final norm, lm_head and RoPE tables are the TARGET's, taken from the
// engine's own objects (Model::embed, PackedMatrix::row_f32, model::Rope), frozen.
// Norm weights are stored as in the file (Gemma: w, applied as 1 + w in fp32).
//
// Parameters live in ONE flat fp32 vector (tensors sorted by name, the drafter
// file's names and shapes); the optimizer, EMA, gradient all-reduce and the
// checkpoint work on flat tensors, the modules on per-tensor views of them.
// Internal to the train layer (torch types).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "drafter/drafter.h"
#include "model/forward.h"
#include "model/layer_io.h"

namespace mtp::train {

// Name -> (offset, shape) of each tensor in a flat parameter vector (the
// drafter's, or a pretrained target's: train/llama_torch.h).
struct FlatLayout {
  struct Entry {
    std::string name;
    int64_t offset = 0, numel = 0;
    std::vector<int64_t> shape;
    bool decay = false;  // weight decay applies (matrices, not norms or biases)
  };
  std::vector<Entry> entries;  // sorted by name
  int64_t total = 0;

  static FlatLayout for_drafter(const model::ModelConfig& target, const drafter::DrafterConfig& d);
  // Any tensor list (sorted by name here; matrices decayed, norms and biases not).
  static FlatLayout from_shapes(model::TensorShapes shapes);
  const Entry& at(const std::string& name) const;
  size_t index(const std::string& name) const { return size_t(&at(name) - entries.data()); }
  // Tensors by name <-> one flat vector (sizes checked; ShapeError naming the tensor).
  std::vector<float> flatten(const std::map<std::string, std::vector<float>>& t) const;
  std::map<std::string, std::vector<float>> unflatten(const float* flat, int64_t n) const;
  nlohmann::json to_json() const;

  // Per-tensor views (layout order) of a flat fp32 vector [total]. They share
  // its storage, so in-place updates of `flat` (the optimizer, EMA) are seen by
  // the views. requires_grad: the views are autograd leaves whose .grad() a
  // backward fills (flat_grad() gathers them).
  std::vector<torch::Tensor> views(const torch::Tensor& flat, bool requires_grad) const;
  // The leaves' gradients as one flat vector (zeros for tensors without one).
  torch::Tensor flat_grad(const std::vector<torch::Tensor>& leaves) const;
  // A flat fp32 tensor [total] on `dev` from host values (ShapeError on a size mismatch).
  torch::Tensor to_flat(const std::vector<float>& values, torch::Device dev) const;
};

// x / sqrt(mean(x²) + eps) · w over the last dimension (kernels::rmsnorm).
torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& w, float eps);

// RoPE tables of positions 0..R-1, computed by the engine's own model::Rope:
// cos and sin, each [1, R, 1, head_dim/2] on `dev` (broadcast over [B, R, heads, half]).
using RopeTables = std::pair<torch::Tensor, torch::Tensor>;
RopeTables rope_tables(const model::Rope& rope, bool local, int64_t R, int64_t head_dim,
                       torch::Device dev);

// [R, R] bool, true = masked: query t sees keys j <= t and, with window W > 0,
// t - j < W (block.cc: lo = t + 1 - W).
torch::Tensor causal_mask(int64_t R, int window, torch::Device dev);

// What a layer of a target with layer kinds (Gemma 4) takes beyond x: its
// index (c.layer_kind(layer): head width, kv heads, K = V, the layer whose
// K/V it reads), the K/V the owner layers computed in this call (an owner
// stores its own, a reader attends with its owner's: [B, KV, R, hd] each,
// after norm and RoPE) and, with per-layer embeddings, its input [B, R, ple_dim].
struct LayerContext {
  int layer = 0;
  std::map<int, std::pair<torch::Tensor, torch::Tensor>>* shared_kv = nullptr;
  torch::Tensor ple;
};

// A layer's K/V over T positions of B sequences (train/torch_target.h): k, v
// [B, KV, T, hd]; pos [B, R] the positions of the rows a call forwards.
struct LayerKV {
  torch::Tensor k, v, pos;
};

// The MLP of a layer over its normed input xn [B, R, d]: down(act(gate) · up).
torch::Tensor gated_mlp(const model::ModelConfig& c,
                        const std::function<torch::Tensor(const std::string&)>& weight,
                        const torch::Tensor& xn);

// One decoder layer of family c (model/block.cc) over x [B, R, d], with autograd.
// Qwen3.5's full-attention layers: the sigmoid output gate (c.attn_gate) and
// partial rotary (rope tables of c.rotary_dim(hd) dims; the rest unrotated).
// weight(name): the layer's tensor by Hugging Face name ("self_attn.q_proj.weight");
// norm weights as stored (Gemma's 1 + w is applied here, in fp32). rope: the
// tables of the layer's kind (its head width).
// Without kv: rows are positions 0..R-1, rope [1, R, 1, hd/2], mask [R, R].
// With kv: the rows' K/V are written at kv->pos and the rows attend over all
// T cached positions: rope [B, R, 1, hd/2] at kv->pos, mask [B, 1, R, T].
torch::Tensor decoder_layer(const model::ModelConfig& c,
                            const std::function<torch::Tensor(const std::string&)>& weight,
                            torch::Tensor x, const RopeTables& rope, const torch::Tensor& mask,
                            const LayerContext& lc = {}, LayerKV* kv = nullptr);

// A tensor's values on the host (fp32).
std::vector<float> to_host(const torch::Tensor& t);

class TorchMtp {
 public:
  // The target's frozen pieces are copied to `dev` (lm_head: vocab × d fp32).
  TorchMtp(const model::Model& target, const drafter::DrafterConfig& dc, torch::Device dev);

  const FlatLayout& layout() const { return layout_; }
  const drafter::DrafterConfig& config() const { return dc_; }
  const model::ModelConfig& block_config() const { return bc_; }
  torch::Device device() const { return dev_; }
  int d_model() const { return bc_.d_model; }
  int vocab() const { return bc_.vocab; }

  // layout().views / flat_grad of a flat parameter vector [layout().total] on the device.
  std::vector<torch::Tensor> views(const torch::Tensor& flat, bool requires_grad) const {
    return layout_.views(flat, requires_grad);
  }
  torch::Tensor flat_grad(const std::vector<torch::Tensor>& leaves) const {
    return layout_.flat_grad(leaves);
  }
  // A flat tensor on the device from host values (size checked).
  torch::Tensor to_flat(const std::vector<float>& values) const {
    return layout_.to_flat(values, dev_);
  }

  // Module embedding rows (Model::embed, × embed_scale in fp32): tokens [n] -> [n, d].
  torch::Tensor embed(const std::vector<int32_t>& tokens) const;

  // Module k over rows t = 0..R-1 of B sequences. h_in, e: [B, R, d] fp32 on the
  // device (h_in: the raw capture for k = 0, rounded here; h_{k-1} otherwise).
  // Returns h_k [B, R, d]. `params`: views() of a flat parameter vector.
  torch::Tensor module_forward(int k, const std::vector<torch::Tensor>& params,
                               const torch::Tensor& h_in, const torch::Tensor& e) const;

  // Target head: [N, d] -> [N, V] (final norm, lm_head, final soft-cap).
  torch::Tensor logits(const torch::Tensor& h) const;

  // Rows of logits materialised at once by the chunked loss: about 4 M floats.
  int64_t head_chunk_rows() const;

 private:
  using P = std::vector<torch::Tensor>;
  torch::Tensor param(const P& p, const std::string& name) const;
  torch::Tensor norm_weight(const P& p, const std::string& name) const;
  torch::Tensor block(int k, const P& p, torch::Tensor x) const;
  const RopeTables& rope_tables(int64_t R) const;
  torch::Tensor attn_mask(int64_t R) const;  // [R, R] bool, true = masked

  const model::Model& target_;
  drafter::DrafterConfig dc_;
  model::ModelConfig bc_;  // module block config (drafter::module_block_config)
  torch::Device dev_;
  FlatLayout layout_;
  torch::Tensor lm_head_, final_norm_;  // [V, d], [d] (frozen)
  mutable std::map<int64_t, RopeTables> rope_cache_;  // R -> cos, sin
  mutable std::map<int64_t, torch::Tensor> mask_cache_;
};

// libtorch intra-op threads and, when libtorch's BLAS is OpenBLAS (Debian), its
// own thread pool (found at run time; no link dependency). Also keeps large
// allocations in the heap (mallopt): per-step activations are reused instead
// of being mmapped and page-faulted afresh.
void set_threads(int n);

// The training device named "cpu" or "cuda" (InputError naming the setting
// `device` for another name, or for cuda when this libtorch build has no CUDA
// or sees no CUDA device). cuda: device local_rank mod the devices visible
// (one GPU per local rank).
torch::Device training_device(const std::string& name, int local_rank = 0);

// Rounds fp32 values to `t` (BF16/F16: round to nearest even, as f32_to_bf16).
torch::Tensor round_to_dtype(const torch::Tensor& x, DType t);

}  // namespace mtp::train
