// Row-wise operations of the transformer forward. Every function processes one
// row (one token) at a time with a fixed reduction order, so results are
// independent of how many rows a call holds (batch invariance).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace mtp::kernels {

// out[i] = x[i] / sqrt(mean(x²) + eps) * w[i]. The mean is accumulated in fp32.
// (Gemma's (1 + w) is folded into w at load, in fp32.) out may alias x.
void rmsnorm(const float* x, const float* w, size_t n, float eps, float* out);

// Rotary embedding of one head vector in place. cos/sin: [head_dim / 2] for this
// position. interleaved: pairs (x[2i], x[2i+1]) (llama2.c, Meta); otherwise
// rotate-half pairs (x[i], x[i + head_dim/2]) (Hugging Face).
void rope(float* x, const float* cos, const float* sin, size_t head_dim, bool interleaved);

// In-place softmax over n values (max-subtracted, fp32).
void softmax(float* x, size_t n);

// y = cap * tanh(y / cap) elementwise (Gemma soft-capping).
void softcap(float* y, size_t n, float cap);

// One query head attending to keys/values at positions [lo, hi] (inclusive).
// Position p lives in slot p % n_slots of k/v; a slot is `stride` floats apart,
// the head's vector is at offset 0 of the passed pointers. Only the slots of
// positions lo..hi are read. scores: scratch of hi - lo + 1 floats, holding the
// probabilities p_j on return. score = (q·k) * scale, soft-capped when cap > 0,
// then softmax; out[head_dim] = Σ p_j v_j in position order.
// Fixed order (the result depends on the inputs, head_dim and the SIMD target
// only — not on the slot layout or on which call computes the row):
// - out[i] is the chain acc = fma(p_j, v_j[i], acc), j = 0, 1, ..., from +0
//   (on targets without FMA, simd_target_has_fma() false: acc = p_j·v_j[i]
//   rounded, then + acc);
// - q·k: head_dim >= simd_f32_lanes(): one vector accumulator over full
//   vectors, summed across lanes, then the remaining dims one fma at a time;
//   head_dim < simd_f32_lanes() (narrow heads): the chain
//   s = fma(q[t], k[t], s), t = 0, 1, ..., from +0.
void attend(const float* q, const float* k, const float* v, size_t stride, size_t n_slots,
            size_t lo, size_t hi, size_t head_dim, float scale, float cap, float* scores,
            float* out);

// attend over an explicit key sequence: key j (j = 0 .. n-1) lives in slot
// slots[j] of k/v (draft trees: the committed positions, then the node's
// ancestors and itself in their tree slots, model/kv_cache.h). Same
// arithmetic and order per key as attend: when slots[j] is the slot attend
// reads for position lo + j, the result is attend's, bit for bit.
void attend_slots(const float* q, const float* k, const float* v, size_t stride,
                  const uint32_t* slots, size_t n, size_t head_dim, float scale, float cap,
                  float* scores, float* out);

// One query of attend_group: head vector q attending to positions [lo, hi];
// scores: its scratch of hi - lo + 1 floats (the probabilities on return);
// out: its head_dim outputs.
struct AttendQuery {
  const float* q;
  size_t lo, hi;
  float* scores;
  float* out;
};
inline constexpr size_t kAttendGroupMax = 64;  // queries per attend_group call

// attend() for several queries that read the same k/v (the query heads of one
// kv head, for the rows of one sequence), each over its own positions: every
// query's out and scores are attend's, bit for bit. The keys are read once for
// all (narrow heads: one in-register transpose per block of keys serves every
// query) and the weighted sums of several queries run as independent chains.
// The union of the ranges must fit the ring (max hi - min lo < n_slots) and
// there are at most kAttendGroupMax queries (ShapeError otherwise).
void attend_group(std::span<const AttendQuery> qs, const float* k, const float* v, size_t stride,
                  size_t n_slots, size_t head_dim, float scale, float cap);

// fp32 lanes of the SIMD target chosen at runtime (16 on AVX3, 8 on AVX2).
size_t simd_f32_lanes();

// Gated activations over n elements: out[i] = act(gate[i]) * up[i].
void silu_mul(const float* gate, const float* up, size_t n, float* out);
void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out);

// Index of the largest value; ties break to the lowest index. NaN never wins.
size_t argmax(const float* x, size_t n);

}  // namespace mtp::kernels
