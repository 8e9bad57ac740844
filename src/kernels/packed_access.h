// Internal to kernels: construction of PackedMatrix storage (pack_float.cc,
// pack_quant.cc) and what the packers and matmul.cc share.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "core/large_alloc.h"
#include "kernels/matmul.h"
#include "kernels/matmul_layout.h"

namespace mtp::kernels {

struct PackedMatrixAccess {
  // Sets the shape and allocates `bytes` of zeroed, 64-byte-aligned storage.
  static void set(PackedMatrix& m, size_t rows, size_t cols, WeightType hold, size_t bytes) {
    m.rows_ = rows;
    m.cols_ = cols;
    m.hold_ = hold;
    m.bytes_ = bytes;
    // Zeroed (padding rows / cols), on huge pages when large (core/large_alloc.h).
    m.data_ = std::shared_ptr<uint8_t[]>(alloc_large(bytes));
  }
  static uint8_t* mut(PackedMatrix& m) { return m.data_.get(); }
};

namespace detail {
// Superchunks (kSuper cols) of a row of `cols` values.
inline size_t n_super_of(size_t cols) { return (cols + kSuper - 1) / kSuper; }
// The kernel element type of a float hold.
inline Elem elem_of(WeightType hold) {
  return hold == WeightType::BF16 ? Elem::BF16 : hold == WeightType::F16 ? Elem::F16 : Elem::F32;
}
// PackedMatrix::pack for a quantized hold (pack_quant.cc).
PackedMatrix pack_quantized(const void* src, DType st, size_t rows, size_t cols, WeightType hold);
// matmul() for a quantized hold (matmul_grouped.cc: grouped_blocks.h's
// layout); strides already checked.
void matmul_grouped(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
               size_t y_stride, ThreadPool* pool);
// matmul() for a view (PackedMatrix::view, matmul_rows.cc); strides already
// checked.
void matmul_view(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
                 size_t y_stride, ThreadPool* pool);
// A quantized hold of `rows` GGUF rows of type t (ggml_row_bytes each, back to
// back): Q8_0, Q4_0 and Q4_K grouped (grouped_blocks.h), the other types as they are.
PackedMatrix hold_blocks(const uint8_t* blocks, GgmlType t, WeightType hold, size_t rows, size_t cols);
}  // namespace detail

}  // namespace mtp::kernels
