#include "model/weights.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/setting.h"
#include "kernels/quant_blocks.h"
#include "model/layer_io.h"

namespace mtp::model {

void EmbeddingTable::lookup(int32_t id, float scale, float* out) const {
  if (id < 0 || size_t(id) >= rows) {
    fail<InputError>("token id {} is outside the vocabulary [0, {})", id, rows);
  }
  if (blocks != GgmlType::F32) {
    const size_t rb = ggml_row_bytes(static_cast<uint32_t>(blocks), cols);
    kernels::dequantize_row(blocks, static_cast<const uint8_t*>(data) + size_t(id) * rb, cols, out);
  } else {
    const auto* base = static_cast<const uint8_t*>(data) + size_t(id) * cols * dtype_size(dtype);
    to_f32(base, dtype, cols, out);
  }
  if (scale != 1.0f) {
    for (size_t i = 0; i < cols; ++i) out[i] *= scale;
  }
}

kernels::WeightType resolve_hold(const Hold& hold, DType stored) {
  if (hold) return *hold;
  return stored == DType::BF16  ? kernels::WeightType::BF16
         : stored == DType::F16 ? kernels::WeightType::F16
                                : kernels::WeightType::F32;
}

TiedHead parse_tied_head(const std::string& name) {
  if (name == "auto") return TiedHead::Auto;
  if (name == "packed") return TiedHead::Packed;
  if (name == "mapped") return TiedHead::Mapped;
  if (name == "mapped-blocks") return TiedHead::MappedBlocks;
  fail_setting<InputError>("tied_head",
                           "unknown tied-head mode '{}' (want auto, packed, mapped or "
                           "mapped-blocks)", name);
}

kernels::PackedMatrix EmbeddingTable::head(const Hold& hold, TiedHead mode,
                                           const std::string& what) const {
  if (blocks != GgmlType::F32) {
    if (mode == TiedHead::MappedBlocks)
      return kernels::PackedMatrix::view(data, blocks, rows, cols, owner);
    return kernels::PackedMatrix::pack_blocks(data, blocks, rows, cols);
  }
  if (mode == TiedHead::Packed) return pack_float_matrix(data, dtype, rows, cols, hold, what);
  const kernels::WeightType h = resolve_hold(hold, dtype);
  // Holds that keep every stored value (and so compute its bits).
  const bool exact = h == kernels::WeightType::F32 ||
                     (h == kernels::WeightType::BF16 && dtype == DType::BF16) ||
                     (h == kernels::WeightType::F16 && dtype == DType::F16);
  if (!exact && mode == TiedHead::Auto) return pack_float_matrix(data, dtype, rows, cols, hold, what);
  if (!exact)  // an explicit `mapped`
    fail_setting<ConfigError>("tied_head", "{}: an in-place head reads the {} values as stored, "
                              "but the weights are held as {}", what, dtype_name(dtype),
                              kernels::weight_type_name(h));
  const GgmlType t = dtype == DType::BF16 ? GgmlType::BF16 : dtype == DType::F16 ? GgmlType::F16
                                                                                 : GgmlType::F32;
  return kernels::PackedMatrix::view(data, t, rows, cols, owner);
}

std::vector<float> norm_weight(const void* src, DType t, size_t n, bool one_plus) {
  std::vector<float> w(n);
  to_f32(src, t, n, w.data());
  check_finite(w.data(), n, "norm weight");
  if (one_plus) {
    for (auto& x : w) x = 1.0f + x;
  }
  return w;
}

void check_finite(const float* x, size_t n, const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      fail<FormatError>("{} holds a non-finite value ({}) at element {}", what, x[i], i);
    }
  }
}

void check_finite(const void* src, DType t, size_t n, const std::string& what) {
  if (t == DType::F32) return check_finite(static_cast<const float*>(src), n, what);
  // bf16/fp16: exponent all ones means Inf/NaN.
  const auto* h = static_cast<const uint16_t*>(src);
  uint16_t mask = t == DType::BF16 ? 0x7f80 : 0x7c00;
  for (size_t i = 0; i < n; ++i) {
    if ((h[i] & mask) == mask) {
      float v = t == DType::BF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
      fail<FormatError>("{} holds a non-finite value ({}) at element {}", what, v, i);
    }
  }
}

void check_finite_blocks(const void* src, GgmlType t, size_t rows, size_t cols,
                         const std::string& what) {
  if (const auto bad = kernels::find_nonfinite_scale(t, src, rows, cols)) {
    fail<FormatError>("{} holds a non-finite scale {} = {} in block {} of row {} ({} blocks)", what,
                      bad->field, bad->value, bad->block, bad->row,
                      ggml_type_name(static_cast<uint32_t>(t)));
  }
}

}  // namespace mtp::model
