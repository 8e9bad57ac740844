// Scalar reference kernel and small helpers. Reference semantics:
// y[r][o] = sum_i w[o][i] * x[r][i], summed sequentially in fp32 over i, reading
// the weights through PackedMatrix::row_f32 (so it sees exactly the held values).
// Its bits differ from the SIMD kernel's reduction order; tests compare with a
// tolerance. Packing and the SIMD kernel live in matmul.cc.
#include <vector>

#include "core/error.h"
#include "kernels/matmul.h"

namespace mtp::kernels {

namespace {
constexpr WeightType kAllTypes[] = {WeightType::F32,  WeightType::BF16, WeightType::F16, WeightType::Q8_0,
                                    WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,
                                    WeightType::Q5_1, WeightType::Q4_K, WeightType::Q5_K,
                                    WeightType::Q6_K};
}

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "fp32";
    case WeightType::BF16: return "bf16";
    case WeightType::F16: return "fp16";
    case WeightType::Q8_0: return "q8_0";
    case WeightType::Q4_0: return "q4_0";
    case WeightType::Q4_1: return "q4_1";
    case WeightType::Q5_0: return "q5_0";
    case WeightType::Q5_1: return "q5_1";
    case WeightType::Q4_K: return "q4_k";
    case WeightType::Q5_K: return "q5_k";
    case WeightType::Q6_K: return "q6_k";
  }
  return "?";
}

WeightType parse_weight_type(const std::string& name) {
  for (WeightType t : kAllTypes)
    if (name == weight_type_name(t)) return t;
  std::string all;
  for (WeightType t : kAllTypes) all += std::string(all.empty() ? "" : ", ") + weight_type_name(t);
  fail<InputError>("a weight type must be one of {}; got '{}'", all, name);
}

bool weight_type_quantized(WeightType t) {
  return t != WeightType::F32 && t != WeightType::BF16 && t != WeightType::F16;
}

GgmlType weight_ggml_type(WeightType t) {
  switch (t) {
    case WeightType::F32: return GgmlType::F32;
    case WeightType::BF16: return GgmlType::BF16;
    case WeightType::F16: return GgmlType::F16;
    case WeightType::Q8_0: return GgmlType::Q8_0;
    case WeightType::Q4_0: return GgmlType::Q4_0;
    case WeightType::Q4_1: return GgmlType::Q4_1;
    case WeightType::Q5_0: return GgmlType::Q5_0;
    case WeightType::Q5_1: return GgmlType::Q5_1;
    case WeightType::Q4_K: return GgmlType::Q4_K;
    case WeightType::Q5_K: return GgmlType::Q5_K;
    case WeightType::Q6_K: return GgmlType::Q6_K;
  }
  return GgmlType::F32;
}

double weight_type_bytes_per_elem(WeightType t) {
  const GgmlTypeInfo i = ggml_type_info(static_cast<uint32_t>(weight_ggml_type(t)));
  return static_cast<double>(i.block_bytes) / static_cast<double>(i.block_elems);
}

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
