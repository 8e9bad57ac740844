// The target's weights as the forward consumes them.
//
// Matrices are repacked at load (kernels::PackedMatrix, fp32 or bf16 held);
// q/k/v are fused into one [ (H + 2·KV)·hd, d ] matrix and gate/up into one
// [2·ffn, d] matrix so each sub-layer is one kernel call. Norm weights are small
// fp32 copies (Gemma's 1 + w folded in, in fp32). The embedding table is used in
// place from the memory-mapped checkpoint (EmbeddingTable keeps a view).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_type.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace mtp::model {

// How float matrices are held (--weights): a type, or nullopt = as stored
// (`--weights auto`, the default): a matrix stored as BF16 is held as bf16, one
// stored as F16 as fp16, F32 (or mixed float parts) as fp32, ggml block types
// as they are. Each hold keeps the stored values exactly, and the kernels
// compute the same bits from a bf16 or fp16 hold as from an fp32 hold of the
// same values (kernels/matmul.h), so `auto` computes what `fp32` computes, with
// half the bytes per token for a bf16 or fp16 checkpoint. A quantized type
// requantizes at load.
using Hold = std::optional<kernels::WeightType>;
// The hold of a float matrix whose source is `stored` (F32, BF16 or F16).
kernels::WeightType resolve_hold(const Hold& hold, DType stored);

// How a tied head reads the token table (LoadOptions::tied_head):
//   Auto (the default): Mapped where that keeps the values, else Packed —
//         float storage (bf16, fp16, fp32) under a hold that keeps every
//         stored value is read in place; a hold that changes the values
//         (a bf16 hold of fp32 storage, a quantized hold) and ggml block
//         storage get the packed copy. In place saves the table's bytes
//         (805 MB on Gemma 4 E2B's 262,144 x 1,536 bf16 head) for ~13 %
//         of the head's time at 1 thread and none at 2 (docs/perf/gemma4.md);
//   Packed: a packed copy — the kernels' layout, the fastest product at
//         1 thread;
//   Mapped: float storage read in place (kernels::PackedMatrix::view, no
//         copy: the table's bytes stay in the memory map) under a hold that
//         keeps its values (bf16 held as bf16 or fp32, fp16 as fp16 or fp32,
//         fp32 as fp32; another is refused: ConfigError, setting
//         "tied_head"); ggml block storage stays a packed copy (its fast
//         kernels need the grouped layout);
//   MappedBlocks: block storage in place too (the reference arithmetic,
//         row by row: much slower).
// In place or packed, every logit has the same bits (kernels/matmul_rows.cc).
enum class TiedHead : uint8_t { Auto, Packed, Mapped, MappedBlocks };
// "auto" | "packed" | "mapped" | "mapped-blocks"; InputError naming the allowed set.
TiedHead parse_tied_head(const std::string& name);

// A [vocab, d] table viewed in place: fp32, bf16 or fp16 storage (`dtype`),
// or, when `blocks` is a ggml block type (Q8_0 ... Q6_K, as GGUF token_embd
// often is), rows of those blocks (ggml_row_bytes(blocks, cols) bytes each).
struct EmbeddingTable {
  const void* data = nullptr;
  DType dtype = DType::F32;
  size_t rows = 0, cols = 0;
  GgmlType blocks = GgmlType::F32;  // F32: plain storage of `dtype`
  std::shared_ptr<const void> owner;  // keeps `data` alive (a head viewing it shares it)
  // Row `id` converted (dequantized) to fp32 and multiplied by scale (in
  // fp32). Throws InputError for ids outside [0, rows).
  void lookup(int32_t id, float scale, float* out) const;
  // The tied head over the whole table, [rows, cols]: in place or a packed
  // copy as `mode` says (TiedHead). A packed copy holds raw blocks as stored
  // (PackedMatrix::pack_blocks), whatever `hold`, and floats as `hold`; a
  // value the hold cannot represent is an InputError naming `what`.
  kernels::PackedMatrix head(const Hold& hold, TiedHead mode, const std::string& what) const;
};

// One decoder layer. hd, KV, ffn: the layer's kind (ModelConfig::layer_kind).
struct LayerWeights {
  std::vector<float> attn_norm;       // [d] input_layernorm
  std::vector<float> post_attn_norm;  // [d] Gemma sandwich only
  std::vector<float> ffn_norm;        // [d] post_attention_layernorm (Llama/Qwen) /
                                      //     pre_feedforward_layernorm (Gemma)
  std::vector<float> post_ffn_norm;   // [d] Gemma sandwich only
  std::vector<float> q_norm, k_norm;  // [hd] Qwen3 / Gemma 3 / Gemma 4 (k: K/V owners)
  std::vector<float> qkv_bias;        // [(H + 2KV)·hd] Qwen2 only
  // [(H + 2KV)·hd, d]: q, k, v rows; [(H + KV)·hd, d] for a K = V layer (q,
  // k); [H·hd, d] for a layer reading another's K/V (q only).
  kernels::PackedMatrix wqkv;
  kernels::PackedMatrix wo;           // [d, H·hd]
  kernels::PackedMatrix w_gate_up;    // [2·ffn, d]: rows 0..ffn-1 gate, then up
  kernels::PackedMatrix w_down;       // [d, ffn]
  // Per-layer embeddings (Gemma 4, ple_dim = e): gate [e, d], projection
  // [d, e], and the norm after it [d].
  kernels::PackedMatrix w_ple_gate, w_ple_proj;
  std::vector<float> ple_post_norm;
  float layer_scalar = 1.0f;          // Gemma 4: the layer's output × this
  // A Gated DeltaNet layer (LayerKind::recurrent; LinearAttn a, C = conv_dim,
  // Hv = v_heads) instead of q/k/v/o: in_proj_qkv, in_proj_z, in_proj_b,
  // in_proj_a fused [C + value_dim + 2·Hv, d]; the depthwise causal conv
  // [C, conv_kernel]; -exp(A_log) and dt_bias [Hv]; the gated norm's weight
  // [v_dim] (plain w); out_proj [d, value_dim].
  kernels::PackedMatrix w_lin_in, w_lin_out;
  std::vector<float> conv_w, a_neg, dt_bias, lin_norm;
};

// The checkpoint's native multi-token-prediction head (Qwen3.5's mtp.*,
// GGUF blk.{n_layers}.nextn.*): x = fc · [norm_e(embed(token)); norm_h(h)],
// one full-attention layer of the target's shape, then `norm`; the target's
// embedding and lm_head are shared (drafter/native_head.h runs it).
struct NativeMtpWeights {
  std::vector<float> norm_embed, norm_hidden, norm;  // [d] (1 + w folded in)
  kernels::PackedMatrix fc;                          // [d, 2d], columns [e; h]
  LayerWeights layer;                                // a full-attention layer
  bool present() const { return !layer.attn_norm.empty(); }
};

struct ModelWeights {
  EmbeddingTable embed;              // [vocab, d], in place
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;     // [d]
  // Per-layer embeddings (ple_dim = e, L layers): the token table [vocab, L·e]
  // in place (read by rows, never copied), the projection of the layer-0
  // input [L·e, d] and its per-layer norm [e].
  EmbeddingTable ple_embed;
  kernels::PackedMatrix ple_model_proj;
  std::vector<float> ple_proj_norm;
  kernels::PackedMatrix lm_head;     // [vocab, d] (tied: embed.head(), in place or packed)
  NativeMtpWeights mtp;              // ModelConfig::mtp_layers > 0 and in the checkpoint
  // Keeps the memory maps (and any converted buffers) the views point into.
  std::vector<std::shared_ptr<void>> keep_alive;
};

// Norm weight from storage to fp32; when one_plus, 1 + w computed in fp32.
std::vector<float> norm_weight(const void* src, DType t, size_t n, bool one_plus);

// Throws FormatError naming `what` if any value is NaN or ±Inf.
void check_finite(const float* x, size_t n, const std::string& what);
void check_finite(const void* src, DType t, size_t n, const std::string& what);
// The same for `rows` rows of `cols` elements of ggml block type t (GGUF
// tensors, quantized drafter matrices): names the row, block and scale field.
void check_finite_blocks(const void* src, GgmlType t, size_t rows, size_t cols,
                         const std::string& what);

}  // namespace mtp::model
