// Dot products of ggml-quantized weight rows with int8-quantized activation
// rows: the arithmetic contract of the quantized kernel (matmul_grouped.cc)
// and its scalar reference. Internal to kernels; tests
// include it.
//
// Activations (row-local, so batch-invariant): each row of x is cut into
// blocks of A elements, A = 32 for Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 and 256 for the K types
// (Q4_K, Q5_K, Q6_K), with scale dx = amax/127 (fp32) and codes
// xq = nearbyint(x · (127/amax)) in [-127, 127] (all 0 when amax = 0); the K
// types also keep the sums of xq over each 16 and each 32 elements (bsum,
// bsum32). Error per element <= dx/2, so |y − y_fp32| <= Σ_blocks dx/2 ·
// Σ|w| (plus fp32 rounding), where y_fp32 = Σ dequantized w · x.
//
// One weight block b (32 or 256 elements) against the activation block(s) it
// covers gives exact int32 sums and fp32 scales, accumulated into one lane:
//   Q8_0/Q4_0/Q5_0: P = Σ_{i<32} w_i·xq_i (w = qs, q−8, q−16),
//              acc += float(P)·(d_w·dx) (held by groups of 16 output rows,
//              grouped_blocks.h, so a verify row pays one scale step per
//              block for 16 outputs)
//   Q4_1/Q5_1: P = Σ_{i<32} q_i·xq_i (q the unsigned code), S = Σ_{i<32}
//              xq_i; acc += float(P)·(d_w·dx), then acc += float(S)·(m_w·dx)
//              (x = d·q + m; held grouped as well)
//   Q4_K/Q5_K: one lane: P = Σ_{j<8} sc_j · Σ_{i in sub-block j} q_i·xq_i
//              (q unsigned), M = Σ_{j<8} m_j · bsum32_j (exact int32s);
//              acc[0] += float(P)·(d·dx), then acc[0] += float(M)·((−dmin)·dx)
//              (held grouped like Q8_0/Q4_0: the sub-block scales, mins and
//              the scale step paid once per block for 16 outputs)
//   Q6_K:      one lane: P = Σ_{j<16} sc_j · (Σ_{i in sub-block j} q_i·xq_i
//              − 32·bsum16_j) (q in 0..63, sc signed; exact int32);
//              acc[0] += float(P)·(d·dx) (held grouped as well)
// (d_w·dx, m_w·dx and (−dmin)·dx are single fp32 products; every "acc += a·b" is
// ONE fused multiply-add, fma(a, b, acc), one rounding — the kernels use
// vfmadd, the reference std::fma), blocks in increasing order.
// Then y = acc. Integer sums are exact and every fp32 operation is fixed, so y depends only on the weight row, the
// activation row and cols —
// and is the same on every SIMD target (tests check the kernels against
// quant_dot_ref bit for bit).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/ggml_type.h"

namespace mtp::kernels::detail {

// Elements per activation block for weights of type t (32 or 256).
size_t act_block(GgmlType t);

// Quantized activation rows ([rows, cols], row stride cols).
struct QuantAct {
  size_t rows = 0, cols = 0, ab = 0;  // ab: act_block
  std::vector<int8_t> q;              // [rows, cols], 32-byte aligned rows (cols % 32 == 0)
  std::vector<float> d;               // [rows, cols / ab]
  std::vector<int16_t> bsum;          // [rows, cols / 16] (K types)
  // [rows, cols / 32] (K types): Σ xq of each 32 (|.| <= 4064), pairs of
  // sub-blocks adjacent so one 4-byte broadcast feeds Q4_K's vpdpwssd of
  // the mins (bsum32_{2p}, bsum32_{2p+1} against m_{2p}, m_{2p+1}).
  std::vector<int16_t> bsum32;
  // The 32-element types, [rows, cols / 32]: act_xcorr_factor(t) · Σ xq of
  // each block. Q8_0, Q4_0, Q5_0 (factor −u, u = 128, 8, 16): where the
  // kernel's lanes start: it multiplies the unsigned held codes (Q8_0: c +
  // 128, grouped_blocks.h; Q4_0, Q5_0: q), and Σ (c + u)·xq − u·Σ xq = Σ
  // c·xq, exactly. Q4_1, Q5_1 (factor 1): S, the min term's sum.
  std::vector<int32_t> xcorr;
  const int8_t* qrow(size_t r) const { return q.data() + r * cols; }
  const float* drow(size_t r) const { return d.data() + r * (cols / ab); }
  const int16_t* brow(size_t r) const { return bsum.data() + r * (cols / 16); }
  const int16_t* b32row(size_t r) const { return bsum32.data() + r * (cols / 32); }
  const int32_t* crow(size_t r) const { return xcorr.data() + r * (cols / 32); }
};

// Quantizes rows x[r·x_stride, +cols) for weights of type t (a block type).
// quantize_act is the vectorized form the kernels call (quant_act.cc),
// quantize_act_ref the scalar statement of the contract; every field is
// equal bit for bit (tests).
void quantize_act(GgmlType t, const float* x, size_t x_stride, size_t rows, size_t cols,
                  QuantAct& out);
void quantize_act_ref(GgmlType t, const float* x, size_t x_stride, size_t rows, size_t cols,
                      QuantAct& out);
// QuantAct::xcorr's factor: −128 (Q8_0), −8 (Q4_0), −16 (Q5_0) — the
// offsets of their held codes —, 1 (Q4_1, Q5_1: their min term), 0 for the
// K types (no xcorr).
int act_xcorr_factor(GgmlType t);
// The two halves both quantizers share: sizing `out` for rows × cols of type
// t (checks cols), and row r's integer sums of its codes (xcorr, bsum, bsum32).
void act_prepare(GgmlType t, size_t rows, size_t cols, QuantAct& out);
void act_sums(GgmlType t, size_t r, QuantAct& out);

// The contract above for weight row `w` (ggml blocks of type t) and
// activation row r of a.
float quant_dot_ref(GgmlType t, const uint8_t* w, const QuantAct& a, size_t r);
// The same for rows [r0, r0 + n) at once (out[0, n)): the weight row is
// decoded once (what the targets without integer kernels run).
void quant_dot_ref_rows(GgmlType t, const uint8_t* w, const QuantAct& a, size_t r0, size_t n,
                        float* out);

// matmul()'s threshold for using the pool (matmul.cc).
extern std::atomic<size_t> g_parallel_min_work;

// VNNI in the quantized kernels (vpdpbusd/vpdpwssd: the same exact integer
// lane sums in fewer instructions, so the same bits). cpu_has_quant_vnni:
// whether this CPU has the VNNI form of a Highway target ("AVX3*":
// AVX512_VNNI, "AVX2": AVX-VNNI; others: none). quant_vnni_allowed: false
// after set_quant_vnni(false) (tests run the kernels both ways). Whether a
// product uses it: simd_quant_vnni() (simd.h), both for the current target.
bool cpu_has_quant_vnni(std::string_view target);
bool quant_vnni_allowed();
void set_quant_vnni(bool allowed);

}  // namespace mtp::kernels::detail
