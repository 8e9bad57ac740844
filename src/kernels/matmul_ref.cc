// Scalar reference kernel and small helpers. Reference semantics:
// y[r][o] = sum_i w[o][i] * x[r][i], summed sequentially in fp32 over i, reading
// the weights through PackedMatrix::row_f32 (so it sees exactly the held values).
// Its bits differ from the SIMD kernel's reduction order; tests compare with a
// tolerance. Packing and the SIMD kernel live in matmul.cc.
#include <vector>

#include "kernels/matmul.h"

namespace mtp::kernels {

const char* weight_type_name(WeightType t) { return t == WeightType::F32 ? "fp32" : "bf16"; }

// x: [q, cols] (row stride cols), y: [q, rows] (row stride rows).
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

}  // namespace mtp::kernels
