// Internal to kernels: how quantized matrices (every block type) are held —
// interleaved by groups of 16 output rows, so that one vpdpbusd multiplies 16
// outputs by 4 elements of an activation row (its 4 bytes broadcast) and the
// per-block scale step (conversion, d_w·dx, fused multiply-add; for the K
// types the sub-block scales and Q4_K/Q5_K's mins; Q4_1/Q5_1's min term) is paid once per 16 outputs per row instead
// of once per output (quant_dot.h states the arithmetic; the kernel is
// matmul_grouped.cc).
//
// A [rows, cols] matrix of G = ceil(rows / 16) groups and nb blocks per row
// (cols / 32; K types cols / 256), rows past `rows` all zero, holds codes first,
// then the per-block metadata ("meta"):
//   codes, per (group g, block b), 64-byte aligned, quad n of the block's
//   code bytes at 64n, row i of the group at 64n + 4i (4 bytes per row):
//     Q8_0 [8, 16, 4] u8 (512 bytes): quad k, element 4k + e of the block:
//          its code c + 128 (the unsigned operand of vpdpbusd; c the stored
//          int8);
//     Q4_0, Q4_1 [4, 16, 4] u8 (256 bytes): quad k = byte 4k + e of the
//          row's qs (low nibble element 4k + e, high nibble 16 + 4k + e: the
//          stored bytes, moved);
//     Q5_0, Q5_1 [5, 16, 4] u8 (320 bytes): the 4 lines of qs as Q4_0, then
//          line 4: the row's 32 fifth bits (qh) as a word whose byte e holds
//          in bit j < 4 the fifth bit of element 4j + e and in bit 4 + j
//          that of element 16 + 4j + e (a permutation of the qh bits: one
//          shift and mask put the bits of a quad's 4 codes at bit 4 of their
//          bytes — left by 4 − k for quad k, right by k for quad k + 4);
//     Q4_K [32, 16, 4] u8 (2048 bytes): quad n = 8c + k = qs bytes 32c + 4k
//          + e (low nibble: element 4k + e of sub-block 2c, high nibble: of
//          sub-block 2c + 1; the stored bytes, moved);
//     Q5_K [40, 16, 4] u8 (2560 bytes): Q4_K's 32 quads of qs, then quads
//          32 + k = qh bytes 4k + e (bit j: the fifth bit of element 4k + e
//          of sub-block j);
//     Q6_K [2, 8, 3, 16, 4] u8 (3072 bytes): for half h and quad t (elements
//          128h + 32k + 4t + e, k < 4) three lines: ql bytes 64h + 4t + e
//          (low nibbles k = 0, high k = 2), ql bytes 64h + 32 + 4t + e (k = 1,
//          k = 3) and qh bytes 32h + 4t + e (bits 2k, 2k + 1: the top two
//          bits of element k) — line (8h + t)·3 + s at 64·line; the stored
//          bytes, moved;
//   meta [G, nb, group_meta_bytes(t)], per (group, block):
//     Q8_0, Q4_0, Q5_0 (32 bytes): d fp16 [16] (row i at 2i);
//     Q4_1, Q5_1 (64 bytes): d fp16 [16] at 0, m fp16 [16] at 32;
//     Q4_K, Q5_K (320 bytes): d fp16 [16] at 0, dmin fp16 [16] at 32, the 6-bit
//          scales sc u8 [8 sub-blocks j][16 rows] at 64 (16j + i), the 6-bit
//          mins m u8 [4 pairs p][16 rows][2] at 192 (32p + 2i + h: m of
//          sub-block 2p + h) — unpacked from the 12 `scales` bytes
//          (a bijection: pack_scale_min_k4 gives them back);
//     Q6_K (288 bytes): d fp16 [16] at 0, the int8 scales sc [16 sub-blocks
//          j][16 rows] at 32 (32 + 16j + i) — no byte more than the GGUF block.
// Two sequential streams (codes on whole cache lines). The bytes are ggml's
// blocks rearranged: grouped_gather_row gives any row's GGUF bytes back.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/ggml_type.h"

namespace mtp::kernels::detail {

constexpr size_t kGroupRows = 16;  // output rows per group

// Elements per block of a held type (32; K types 256).
constexpr size_t group_block_elems(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K ? 256 : 32;
}
// Bytes of codes per (group, block): 512 (Q8_0), 256 (Q4_0, Q4_1), 320
// (Q5_0, Q5_1), 2048 (Q4_K), 2560 (Q5_K), 3072 (Q6_K).
constexpr size_t group_code_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return 512;
    case GgmlType::Q4_0: case GgmlType::Q4_1: return 256;
    case GgmlType::Q5_0: case GgmlType::Q5_1: return 320;
    case GgmlType::Q4_K: return 2048;
    case GgmlType::Q5_K: return 2560;
    default: return 3072;
  }
}
// Bytes of metadata per (group, block): 32; Q4_1, Q5_1 64; Q4_K, Q5_K 320;
// Q6_K 288.
constexpr size_t group_meta_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: case GgmlType::Q5_K: return 320;
    case GgmlType::Q6_K: return 288;
    case GgmlType::Q4_1: case GgmlType::Q5_1: return 64;
    default: return 32;
  }
}
// The held word of a row's 32 fifth bits (see Q5_0 above) from ggml's qh,
// and back: held bit 8e + j is qh bit qh_bit(e, j), the element's index.
constexpr uint32_t qh_bit(uint32_t e, uint32_t j) { return j < 4 ? 4 * j + e : 16 + 4 * (j - 4) + e; }
constexpr uint32_t qh_hold(uint32_t qh) {
  uint32_t w = 0;
  for (uint32_t e = 0; e < 4; ++e)
    for (uint32_t j = 0; j < 8; ++j) w |= (qh >> qh_bit(e, j) & 1u) << (8 * e + j);
  return w;
}
constexpr uint32_t qh_gguf(uint32_t w) {
  uint32_t qh = 0;
  for (uint32_t e = 0; e < 4; ++e)
    for (uint32_t j = 0; j < 8; ++j) qh |= (w >> (8 * e + j) & 1u) << qh_bit(e, j);
  return qh;
}
inline size_t row_groups(size_t rows) { return (rows + kGroupRows - 1) / kGroupRows; }
// Bytes of the held matrix (codes and meta).
inline size_t grouped_bytes(GgmlType t, size_t rows, size_t cols) {
  return row_groups(rows) * (cols / group_block_elems(t)) * (group_code_bytes(t) + group_meta_bytes(t));
}
// Start of the meta in a held matrix.
inline size_t grouped_meta_offset(GgmlType t, size_t rows, size_t cols) {
  return row_groups(rows) * (cols / group_block_elems(t)) * group_code_bytes(t);
}

// Rows [r0, r0 + n) of a held [rows, cols] matrix dst (grouped_bytes, zeroed)
// = n GGUF rows of type t (a held type, ggml_row_bytes each, back to back),
// interleaved as above (so a packer can quantize a few rows at a time).
void grouped_put_rows(GgmlType t, const uint8_t* blocks, size_t r0, size_t n, size_t rows,
                      size_t cols, uint8_t* dst);
// Row r of a held matrix as GGUF bytes (ggml_row_bytes(t, cols)).
void grouped_gather_row(GgmlType t, const uint8_t* held, size_t rows, size_t cols, size_t r,
                        uint8_t* out);

}  // namespace mtp::kernels::detail
