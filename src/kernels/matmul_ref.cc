// Placeholder packing (plain row-major) and scalar kernels; the SIMD version
// replaces pack/matmul. Reference semantics: y[r][o] = sum_i w[o][i] * x[r][i].
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace mtp::kernels {

struct PackedMatrixAccess {
  static void set(PackedMatrix& m, size_t rows, size_t cols, WeightType hold, size_t bytes) {
    m.rows_ = rows;
    m.cols_ = cols;
    m.hold_ = hold;
    m.bytes_ = bytes;
    m.data_ = std::shared_ptr<uint8_t[]>(
        static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), std::free);
  }
  static uint8_t* mut(PackedMatrix& m) { return m.data_.get(); }
};

const char* weight_type_name(WeightType t) { return t == WeightType::F32 ? "fp32" : "bf16"; }

PackedMatrix PackedMatrix::pack(const void* src, DType st, size_t rows, size_t cols,
                                WeightType hold) {
  PackedMatrix m;
  size_t es = hold == WeightType::F32 ? 4 : 2;
  PackedMatrixAccess::set(m, rows, cols, hold, rows * cols * es);
  std::vector<float> tmp(cols);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* s = static_cast<const uint8_t*>(src) + r * cols * dtype_size(st);
    if (hold == WeightType::BF16 && st == DType::BF16) {
      std::memcpy(PackedMatrixAccess::mut(m) + r * cols * 2, s, cols * 2);
      continue;
    }
    to_f32(s, st, cols, tmp.data());
    if (hold == WeightType::F32) {
      std::memcpy(PackedMatrixAccess::mut(m) + r * cols * 4, tmp.data(), cols * 4);
    } else {
      auto* d = reinterpret_cast<uint16_t*>(PackedMatrixAccess::mut(m)) + r * cols;
      for (size_t i = 0; i < cols; ++i) d[i] = f32_to_bf16(tmp[i]);
    }
  }
  return m;
}

void PackedMatrix::row_f32(size_t r, float* out) const {
  if (hold_ == WeightType::F32) {
    std::memcpy(out, data_.get() + r * cols_ * 4, cols_ * 4);
  } else {
    to_f32(data_.get() + r * cols_ * 2, DType::BF16, cols_, out);
  }
}

void matmul_ref(const PackedMatrix& w, const float* x, size_t q, float* y) {
  std::vector<float> row(w.cols());
  for (size_t o = 0; o < w.rows(); ++o) {
    w.row_f32(o, row.data());
    for (size_t r = 0; r < q; ++r) {
      float s = 0;
      for (size_t i = 0; i < w.cols(); ++i) s += row[i] * x[r * w.cols() + i];
      y[r * w.rows() + o] = s;
    }
  }
}

void matmul(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
            size_t y_stride, ThreadPool* pool) {
  auto body = [&](size_t b, size_t e, size_t) {
    std::vector<float> row(w.cols());
    for (size_t o = b; o < e; ++o) {
      w.row_f32(o, row.data());
      for (size_t r = 0; r < q; ++r) {
        float s = 0;
        for (size_t i = 0; i < w.cols(); ++i) s += row[i] * x[r * x_stride + i];
        y[r * y_stride + o] = s;
      }
    }
  };
  if (pool) pool->parallel_for(w.rows(), body, 16);
  else body(0, w.rows(), 0);
}

const char* simd_target() { return "scalar"; }

}  // namespace mtp::kernels
