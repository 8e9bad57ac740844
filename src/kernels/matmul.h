// Weight-matrix × activation kernels: Y[q, rows] = X[q, cols] · Wᵀ.
//
// Batch invariance (docs/INVARIANTS.md invariant 1): the value of Y[r][o] depends only on
// X[r] and W[o] — never on q, on the other rows of X, on the thread count, or on
// how the output range is split. The reduction over `cols` is done in a fixed
// order that is a function of `cols` and the SIMD target alone. This is what
// makes the batched verify forward bit-identical to q one-token forwards.
//
// Weights are repacked at load into the kernels' layout (PackedMatrix); they are
// held as fp32 or bf16, and all arithmetic is fp32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "kernels/simd.h"  // simd_target(), MTPSPEC_SIMD

namespace mtp {
class ThreadPool;
}

namespace mtp::kernels {

enum class WeightType : uint8_t { F32, BF16 };
const char* weight_type_name(WeightType t);  // "fp32" | "bf16"

// A [rows, cols] weight matrix in the kernels' packed layout.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // src: row-major [rows, cols] elements of type src_type (F32, BF16 or F16).
  // Converted to `hold` (fp16 -> bf16 rounds to nearest even) and repacked.
  static PackedMatrix pack(const void* src, DType src_type, size_t rows, size_t cols,
                           WeightType hold);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  WeightType hold() const { return hold_; }
  bool empty() const { return rows_ == 0; }
  size_t bytes() const { return bytes_; }  // packed storage size
  // Row r as fp32 (exactly the values the kernel multiplies by). For tests and
  // reference implementations; not fast.
  void row_f32(size_t r, float* out) const;

  // Layout-specific storage, owned by the kernel implementation.
  const uint8_t* data() const { return data_.get(); }

 private:
  friend struct PackedMatrixAccess;
  size_t rows_ = 0, cols_ = 0, bytes_ = 0;
  WeightType hold_ = WeightType::F32;
  std::shared_ptr<uint8_t[]> data_;  // 64-byte aligned
};

// Y[q, rows] = X[q, cols] · Wᵀ. x has row stride x_stride (>= cols) and y has
// row stride y_stride (>= rows). Batch-invariant (see above). pool may be null;
// it is used only when w.bytes() · q > 8 MiB (smaller products run on the
// calling thread: waking a worker costs more than it saves there).
// x needs no alignment, but rows that do not start on a 64-byte line (or a
// stride that is not a multiple of 16 floats) are first copied into an aligned
// per-thread buffer (q·cols floats): aligned callers skip that copy. The copy
// changes no bits.
void matmul(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
            size_t y_stride, ThreadPool* pool);
inline void matmul(const PackedMatrix& w, const float* x, size_t q, float* y, ThreadPool* pool) {
  matmul(w, x, w.cols(), q, y, w.rows(), pool);
}

namespace detail {
// Sets the bytes · q threshold for using the pool (default 8 MiB); returns the
// previous one. For tests, which use 0 so small products exercise the split.
size_t set_parallel_min_work(size_t bytes_times_q);
}  // namespace detail

// Scalar reference with the same contract: plain sequential fp32 sum (so its
// bits differ from the SIMD kernel's; compare with a tolerance).
void matmul_ref(const PackedMatrix& w, const float* x, size_t q, float* y);

}  // namespace mtp::kernels
