// Dot products of ggml-quantized weight rows with int8-quantized activation
// rows: the arithmetic contract of the quantized kernels (matmul_grouped.cc,
// matmul_quant.cc) and its scalar reference. Internal to kernels; tests
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
// covers gives 8 exact int32 lanes P[l] (l < 8: elements 4l..4l+3 of each
// 32-element chunk c of the block) and fp32 scales:
//   Q5_0:      P[l] = Σ w·xq with w the signed code q−16,
//              s = d_w·dx;   acc[l + 8·(b mod 2)] += float(P[l])·s
//   Q4_1/Q5_1: P[l] = Σ q·xq (q the unsigned code), S[l] = Σ xq (the same
//              4 elements; QuantAct::sum4), s = d_w·dx, sm = m_w·dx;
//              acc[l + 8·(b mod 2)] += float(P[l])·s, then
//              acc[l + 8·(b mod 2)] += float(S[l])·sm   (x = d·q + m)
//   Q8_0/Q4_0: one lane: P = Σ_{i<32} w_i·xq_i (w = qs, q−8),
//              acc[0] += float(P)·(d_w·dx) (held by groups of 16 output rows,
//              grouped_blocks.h, so a verify row pays one scale step per
//              block for 16 outputs)
//   Q4_K/Q5_K: one lane: P = Σ_{j<8} sc_j · Σ_{i in sub-block j} q_i·xq_i
//              (q unsigned), M = Σ_{j<8} m_j · bsum32_j (exact int32s);
//              acc[0] += float(P)·(d·dx), then acc[0] += float(M)·((−dmin)·dx)
//              (held grouped like Q8_0/Q4_0: the sub-block scales, mins and
//              the scale step paid once per block for 16 outputs)
//   Q6_K:      one lane: P = Σ_{j<16} sc_j · (Σ_{i in sub-block j} q_i·xq_i
//              − 32·bsum16_j) (q in 0..63, sc signed; exact int32);
//              acc[0] += float(P)·(d·dx) (held grouped as well)
// (s, d·dx and (−dmin)·dx are single fp32 products; every "acc += a·b" is
// ONE fused multiply-add, fma(a, b, acc), one rounding — the kernels use
// vfmadd, the reference std::fma), blocks in increasing order.
// Then y = acc[0], except Q5_0, Q4_1, Q5_1: y = tree(acc), tree = t[l] += t[l + h] for
// h = 8, 4, 2, 1. Integer sums are exact
// and every fp32 operation is fixed, so y depends only on the weight row, the
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
  // [rows, cols / 4]: act_sum4_factor(t) · Σ of each 4 xq. Q5_0 (factor
  // −16): the kernels multiply the unsigned stored codes q and start the lane
  // sums at it: Σ (q − 16)·xq = sum4 + Σ q·xq, exactly. Q4_1/Q5_1 (factor
  // 1): S[l], the lanes of the min term. Empty for the other types.
  std::vector<int32_t> sum4;
  // Q8_0 and Q4_0, [rows, cols / 32]: −u · Σ xq of each block (u = 128, 8),
  // where the grouped kernel's lanes start: it multiplies the unsigned held
  // codes (Q8_0: c + 128, grouped_blocks.h; Q4_0: q), and
  // Σ (c + u)·xq − u·Σ xq = Σ c·xq, exactly.
  std::vector<int32_t> xcorr;
  // Q5_0, [rows, cols]: xq + 128 as unsigned bytes, for VNNI's
  // u8·s8 product against the signed codes c, started at −128·Σc (weight
  // side): Σ c·xq = Σ c·(xq + 128) − 128·Σ c, exactly. (Starting each row's
  // lanes at an activation-side −128·Σ4 xq instead, as xneg, saves the
  // weight-side dpbusd but reads cols int32 more per row: 8 rows of 4096
  // then outgrow L1 and an 8-row Q8_0 product ran 3x slower on Zen 5.)
  std::vector<uint8_t> qu;
  // Q5_0, Q4_1, Q5_1: the scales d of each tile of kPairTileRows rows by block
  // pair, [ceil(rows / 8), cols / 64, 16]: pair p of tile t holds row 8t + j's
  // d of blocks 2p and 2p + 1 in lanes 2j and 2j + 1 (rows past `rows`: 0).
  // The AVX-512 kernels form the products d_w·dx of a pair for 8 rows in one
  // multiply and hand each row its two by a permute (the same single fp32
  // products as the contract's).
  static constexpr size_t kPairTileRows = 8;
  std::vector<float> dpair;
  const int8_t* qrow(size_t r) const { return q.data() + r * cols; }
  const float* drow(size_t r) const { return d.data() + r * (cols / ab); }
  const int16_t* brow(size_t r) const { return bsum.data() + r * (cols / 16); }
  const int16_t* b32row(size_t r) const { return bsum32.data() + r * (cols / 32); }
  const int32_t* s4row(size_t r) const { return sum4.data() + r * (cols / 4); }
  const uint8_t* urow(size_t r) const { return qu.data() + r * cols; }
  const int32_t* crow(size_t r) const { return xcorr.data() + r * (cols / 32); }
  const float* pair_tile(size_t r) const { return dpair.data() + r / kPairTileRows * (cols / 64) * 16; }
};

// Quantizes rows x[r·x_stride, +cols) for weights of type t (a block type).
// qu is filled only with vnni for Q5_0 (the VNNI kernels' input; an odd last
// block still takes the sum4 path); the reference reads neither. quantize_act is
// the vectorized form the kernels call (quant_act.cc), quantize_act_ref the
// scalar statement of the contract; every field is equal bit for bit (tests).
void quantize_act(GgmlType t, const float* x, size_t x_stride, size_t rows, size_t cols,
                  QuantAct& out, bool vnni = false);
void quantize_act_ref(GgmlType t, const float* x, size_t x_stride, size_t rows, size_t cols,
                      QuantAct& out, bool vnni = false);
// QuantAct::sum4's factor: −16 for Q5_0 (the offset of its codes), 1 for
// Q4_1/Q5_1 (their min term), 0 otherwise (no sum4).
int act_sum4_factor(GgmlType t);
// The two halves both quantizers share: sizing `out` for rows × cols of type
// t (checks cols), and row r's integer sums of its codes (sum4, xcorr, bsum, bsum32).
void act_prepare(GgmlType t, size_t rows, size_t cols, bool vnni, QuantAct& out);
void act_sums(GgmlType t, size_t r, QuantAct& out);
// dpair from d (both quantizers, after every row's d is set).
void act_pairs(QuantAct& out);

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
