// ggml's quantized block formats: the reference dequantizer (the format
// definition) and mtpspec's own quantizer for each type.
//
// Layouts (bytes, little-endian; fp16 = IEEE half), exactly ggml's
// (ggml-common.h), so rows read from a GGUF file are used as stored:
//   Q8_0 (32 elems, 34 B):  d fp16 | qs int8[32]                 x[i] = d·qs[i]
//   Q4_0 (32 elems, 18 B):  d fp16 | qs u8[16]        x[i] = d·((qs[i] & 15) − 8),
//                                                  x[i+16] = d·((qs[i] >> 4) − 8)   (i < 16)
//   Q5_0 (32 elems, 22 B):  d fp16 | qh u32 | qs u8[16]: as Q4_0 with a fifth bit,
//                           bit i of qh for element i, bit i+16 for element i+16,
//                           and offset 16 instead of 8
//   Q4_1 (32 elems, 20 B):  d fp16 | m fp16 | qs u8[16]: codes q as Q4_0's,
//                           unsigned, x = d·q + m
//   Q5_1 (32 elems, 24 B):  d fp16 | m fp16 | qh u32 | qs u8[16]: codes as
//                           Q5_0's, unsigned, x = d·q + m
//   Q4_K (256 elems, 144 B): d fp16 | dmin fp16 | scales u8[12] | qs u8[128]:
//                           8 sub-blocks of 32 with 6-bit scale sc_j and min m_j
//                           (packed in `scales`, see scale_min_k4), element e of
//                           sub-block j = 2c + h (c < 4, h < 2) is nibble h of
//                           qs[32c + e]; x = (d·sc_j)·q − (dmin·m_j)
//   Q5_K (256 elems, 176 B): d | dmin | scales[12] | qh u8[32] | qs u8[128]: as
//                           Q4_K, plus bit j of qh[e] as the fifth bit (+16)
//   Q6_K (256 elems, 210 B): ql u8[128] | qh u8[64] | scales int8[16] | d fp16:
//                           16 sub-blocks of 16 with int8 scale sc_j; element
//                           n = 128h + 32k + l (h, k < 4... see dequantize) has
//                           low 4 bits from ql, high 2 from qh, x = (d·sc_j)·(q − 32)
// The dequantizer evaluates these formulas in fp32 in the order written.
//
// Quantizer (ours, round-to-nearest per block; docs/FORMATS.md lists the
// bounds, tests/kernels/quant_blocks_test.cc checks them):
//   Q8_0: d = amax/127 rounded up to fp16; |err| <= d/2.
//   Q4_0, Q5_0: ggml's sign trick, d = -max/8 (-max/16) where max is the
//     signed value of largest magnitude (d rounded to nearest fp16); q clamped
//     to the range; |err| <= |d| (one step: the value opposite max may clip).
//   Q4_1, Q5_1: m = the block's minimum rounded down to fp16, d = (max −
//     m)/L (L = 15, 31) rounded up to fp16, q = nearest code (none clips);
//     |err| <= d/2 (ggml's reference rounds m to nearest and truncates
//     (x − m)/d + 0.5; either's blocks decode by the same formula).
//   Q4_K, Q5_K: per sub-block j of 32, min b_j = min(0, min x) and range
//     to max x; dmin = max_j(−b_j)/63 and d = max_j(step_j)/63 rounded up to
//     fp16 so no 6-bit scale or min overflows; m_j = ceil(−b_j/dmin),
//     sc_j = ceil(((max x) + dmin·m_j)/L / d) (L = 15 or 31) so no value clips;
//     |err| <= (d·sc_j)/2 <= (range_j + dmin)/(2L) + d/2.
//   Q6_K: per sub-block of 16, step s_j = amax_j/31, d = max s_j/127 rounded
//     up to fp16, sc_j = ceil(s_j/d); |err| <= d·sc_j/2 <= amax_j/62 + d/2.
// A block of zeros quantizes to zeros. Inputs must be finite.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/ggml_type.h"

namespace mtp::kernels {

// Whether mtpspec dequantizes / computes with ggml type t: F32, F16, BF16 and
// the eight block types above.
bool ggml_type_supported(GgmlType t);
// Those types as error messages list them.
inline constexpr const char* kSupportedGgmlTypes =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";
// Whether t is one of the eight block (quantized) types.
bool ggml_type_quantized(GgmlType t);

// out[0, n) = the values of row `src` (n elements of type t, n a multiple of
// the block size; also F32/F16/BF16). Throws ShapeError otherwise.
void dequantize_row(GgmlType t, const void* src, size_t n, float* out);

// dst (ggml_row_bytes(t, n) bytes) = x[0, n) quantized to block type t (one of
// the eight quantized types; n a multiple of its block size).
void quantize_row(GgmlType t, const float* x, size_t n, void* dst);

// A block's fp16 scale field that is NaN or ±Inf: every value a block type
// decodes to is its fp16 scales times bounded integers (codes < 64, 6-bit or
// int8 sub-scales), finite whenever the scales are, so these fields are all a
// finiteness check of block data has to read.
struct NonFiniteScale {
  size_t row = 0, block = 0;  // block index within the row
  const char* field = "";     // "d", "m" (Q4_1/Q5_1) or "dmin" (Q4_K/Q5_K)
  float value = 0.0f;
};
// The first non-finite scale of `rows` rows of n elements of block type t
// stored back to back at src (ggml_row_bytes(t, n) bytes each), if any.
std::optional<NonFiniteScale> find_nonfinite_scale(GgmlType t, const void* src, size_t rows,
                                                   size_t n);
// Q4_K/Q5_K's packing of the 8 6-bit scales and mins in 12 bytes: sub-block j.
void scale_min_k4(const uint8_t* scales, size_t j, uint8_t* sc, uint8_t* m);

// Its inverse: the 12 bytes of 8 scales and 8 mins (each < 64), so that
// scale_min_k4 gives them back (every one of the 96 bits is used: unpacking
// and packing are a bijection).
void pack_scale_min_k4(const uint8_t* sc, const uint8_t* m, uint8_t* s);

// All 8 scales and mins at once (what scale_min_k4 gives for j = 0..7), by
// whole-word bit operations: bytes 0..3 hold sc 0..3 and, in their top 2
// bits, the top bits of sc 4..7; bytes 4..7 the same for the mins; bytes
// 8..11 the low nibbles of sc 4..7 (low) and m 4..7 (high).
inline void unpack_scales_k4(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  uint32_t a, b, c;
  __builtin_memcpy(&a, s, 4);
  __builtin_memcpy(&b, s + 4, 4);
  __builtin_memcpy(&c, s + 8, 4);
  const uint32_t six = 0x3f3f3f3fu, nib = 0x0f0f0f0fu, two = 0x03030303u;
  const uint32_t sc_lo = a & six, sc_hi = (c & nib) | ((a >> 6) & two) << 4;
  const uint32_t m_lo = b & six, m_hi = ((c >> 4) & nib) | ((b >> 6) & two) << 4;
  __builtin_memcpy(sc, &sc_lo, 4);
  __builtin_memcpy(sc + 4, &sc_hi, 4);
  __builtin_memcpy(m, &m_lo, 4);
  __builtin_memcpy(m + 4, &m_hi, 4);
}

}  // namespace mtp::kernels
