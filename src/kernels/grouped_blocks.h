// Internal to kernels: how Q8_0 and Q4_0 matrices are held — interleaved by
// groups of 16 output rows, so that one vpdpbusd multiplies 16 outputs by 4
// elements of an activation row (its 4 bytes broadcast) and the per-block
// scale step (conversion, d_w·dx, fused multiply-add) is paid once per 16
// outputs per row instead of once per output (quant_dot.h states the
// arithmetic; the kernel is matmul_grouped.cc).
//
// A [rows, cols] matrix (nb = cols / 32 blocks per row) of G = ceil(rows / 16)
// groups, rows past `rows` all zero, holds codes first, then scales:
//   codes, per (group g, block b), 64-byte aligned:
//     Q8_0 [8, 16, 4] u8 (512 bytes): quad k, row i of the group, element
//          4k + e of the block: its code c + 128 (the unsigned operand of
//          vpdpbusd; c the stored int8);
//     Q4_0 [4, 16, 4] u8 (256 bytes): quad pair k, row i, byte 4k + e of the
//          row's qs (low nibble element 4k + e, high nibble 16 + 4k + e: the
//          stored bytes, moved);
//   scales [G, nb, 16] fp16: row 16g + i's d of block b.
// Two sequential streams (codes on whole cache lines). The bytes are ggml's
// blocks rearranged: grouped_gather_row gives any row's GGUF bytes back.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/ggml_type.h"

namespace mtp::kernels::detail {

constexpr size_t kGroupRows = 16;      // output rows per group
constexpr size_t kGroupScaleBytes = 32;  // scales of one (group, block)

// Whether type t is held grouped (Q8_0, Q4_0).
inline bool held_grouped(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }
// Bytes of codes per (group, block): 512 (Q8_0) or 256 (Q4_0).
inline size_t group_code_bytes(GgmlType t) { return t == GgmlType::Q8_0 ? 512 : 256; }
inline size_t row_groups(size_t rows) { return (rows + kGroupRows - 1) / kGroupRows; }
// Bytes of the held matrix (codes and scales).
inline size_t grouped_bytes(GgmlType t, size_t rows, size_t cols) {
  return row_groups(rows) * (cols / 32) * (group_code_bytes(t) + kGroupScaleBytes);
}
// Start of the scales in a held matrix.
inline size_t grouped_scales_offset(GgmlType t, size_t rows, size_t cols) {
  return row_groups(rows) * (cols / 32) * group_code_bytes(t);
}

// Rows [r0, r0 + n) of a held [rows, cols] matrix dst (grouped_bytes, zeroed)
// = n GGUF rows of type t (Q8_0 or Q4_0, ggml_row_bytes each, back to back),
// interleaved as above (so a packer can quantize a few rows at a time).
void grouped_put_rows(GgmlType t, const uint8_t* blocks, size_t r0, size_t n, size_t rows,
                      size_t cols, uint8_t* dst);
// Row r of a held matrix as GGUF bytes (ggml_row_bytes(t, cols)).
void grouped_gather_row(GgmlType t, const uint8_t* held, size_t rows, size_t cols, size_t r,
                        uint8_t* out);

}  // namespace mtp::kernels::detail
