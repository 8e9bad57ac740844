// Function-preserving widening of a target (issue 13, docs/WIDEN.md).
//
// A widened model has more residual dims, FFN units, attention heads and
// layers, all carrying zero weights, and computes what the original computes:
// bit for bit where the construction is exact (plan.inexact empty), else
// within rounding (each reason listed). The construction:
//   - every real index keeps its position (real dims, units, heads first), so
//     each row's reduction in the matmul kernel sees the same terms in the
//     same order, the zero ones interleaved or appended (+0 to a lane that is
//     never -0: bitwise no-op);
//   - RMSNorm over d' = 4^k·d dims: norm weights × 2^-k and eps × 4^-k make
//     the normalised values bitwise equal (d a multiple of 64 so the kernel's
//     sum of squares adds the same vectors in the same order);
//   - head_dim and the score scale are kept; query head h moves to
//     q_head[h] = (h / g)·g' + h % g (g, g' = heads per kv head) so it still
//     reads its real kv head;
//   - extra layers are appended after the real ones; with zero weights each
//     adds +0 to the residual;
//   - a llama2.c source (interleaved RoPE) becomes rotate-half: q/k rows are
//     permuted within each head (attention scores then sum q·k in another
//     order: within rounding).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/config.h"
#include "model/loader.h"

namespace mtp::model {

// The shape to widen to. 0 = keep the source's value.
struct WidenShape {
  int d_model = 0, n_layers = 0, ffn = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// "1b" (d 1024, 32 layers, ffn 8192, head_dim kept, heads = 1024 / head_dim,
// kv heads keeping the source's grouping) or a comma-separated list of
// d_model=, layers=, ffn=, heads=, kv_heads=, head_dim= (omitted keys keep
// the source's value). InputError naming the bad key or value.
WidenShape parse_widen_shape(const std::string& spec, const ModelConfig& src);

// How every real index maps, and what stays exact.
struct WidenPlan {
  ModelConfig src, dst;     // dst: source "hf", rope rotate-half, untied head
  std::vector<int> q_head;  // [src.n_heads] the widened index of each real query head
  double norm_scale = 1;    // factor on effective d-dim norm weights: sqrt(d / d')
  double qk_scale = 1;      // factor on q/k rows (qk-norm families: eps moved by d / d')
  double embed_scale = 1;   // factor on embedding rows (Gemma's ×√d: √d / √d')
  bool permute_rope = false;         // interleaved (llama2.c) -> rotate-half rows
  std::vector<std::string> inexact;  // why the result is only within rounding
  bool exact() const { return inexact.empty(); }
};

// Checks `s` against `src` and derives the plan. ShapeError naming the field
// and both values for: a dimension narrower than the source's, fewer layers, a
// changed head_dim, heads not a multiple of kv heads, query heads not
// mappable to their kv heads (g' < g), and — unless allow_inexact — a shape
// whose width ratio breaks exactness (d'/d not a power of 4, or d not a
// multiple of 64, or head placement that moves a column's lane).
WidenPlan plan_widen(const ModelConfig& src, const WidenShape& s, bool allow_inexact);

// fp32 tensors by Hugging Face name with their shapes, as a writer takes them.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;  // empty = all zeros (not materialised)
  bool is_norm = false;       // stored F32 whatever the matrix dtype
};
using HostTensors = std::map<std::string, HostTensor>;

// Effective (as the forward uses it, Gemma's 1 + w folded in) d-dim norm
// weight -> the stored widened one [d'] (Gemma: stored w' = g·scale − 1).
std::vector<float> widen_norm(const WidenPlan& p, const std::vector<float>& effective);

// One widened decoder layer under `prefix` (HF names); `src` null = a zero
// layer. `src` must be held in F32 (its packed values are the stored ones).
// Block configs of drafter modules use the same plan (one layer, same family).
void widen_layer(const WidenPlan& p, const LayerWeights* src, const std::string& prefix,
                 HostTensors& out);

// Writes `src` (loaded with F32 hold) widened by `p` into `dir`: config.json,
// model.safetensors (matrices in `dtype` = F32 or BF16, embedding and norms in
// F32) and the tokenizer copied from `tokenizer` ("" = none) under its
// canonical name (tokenizer.json / tokenizer.model / tokenizer.bin, plus
// tokenizer_config.json and special_tokens_map.json when beside it).
// Returns the bytes of model.safetensors.
uint64_t write_widened(const LoadedModel& src, const WidenPlan& p, DType dtype,
                       const std::string& tokenizer, const std::string& dir);

// Writes HostTensors as a safetensors file: norms (is_norm) in F32, the rest in
// `dtype`; zero tensors share one zero buffer. `metadata` as write_safetensors.
void write_host_tensors(const std::string& path, const HostTensors& t, DType dtype,
                        const std::map<std::string, std::string>& metadata);

// The config.json of the widened model (the source's own keys kept when it is
// a Hugging Face folder, so family settings round-trip).
nlohmann::json widened_hf_config(const LoadedModel& src, const WidenPlan& p, DType dtype);

}  // namespace mtp::model
