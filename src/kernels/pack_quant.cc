// PackedMatrix holds of ggml blocks: requantizing fp32/bf16/f16 sources with
// our quantizer, and taking raw blocks from a GGUF file (matmul.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/packed_access.h"
#include "kernels/grouped_blocks.h"
#include "kernels/quant_blocks.h"

namespace mtp::kernels {
namespace {

WeightType hold_of(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return WeightType::Q8_0;
    case GgmlType::Q4_0: return WeightType::Q4_0;
    case GgmlType::Q4_1: return WeightType::Q4_1;
    case GgmlType::Q5_0: return WeightType::Q5_0;
    case GgmlType::Q5_1: return WeightType::Q5_1;
    case GgmlType::Q4_K: return WeightType::Q4_K;
    case GgmlType::Q5_K: return WeightType::Q5_K;
    case GgmlType::Q6_K: return WeightType::Q6_K;
    case GgmlType::BF16: return WeightType::BF16;
    default: return WeightType::F32;
  }
}

// The hold a [*, cols] matrix gets for a requested quantized hold (see pack).
WeightType effective_hold(WeightType hold, size_t cols) {
  const GgmlType t = weight_ggml_type(hold);
  if (cols % ggml_type_info(static_cast<uint32_t>(t)).block_elems == 0) return hold;
  if (cols % 32 != 0) return WeightType::BF16;
  return hold == WeightType::Q6_K ? WeightType::Q8_0 : WeightType::Q5_0;
}
}  // namespace

namespace detail {
PackedMatrix hold_blocks(const uint8_t* blocks, GgmlType t, WeightType hold, size_t rows, size_t cols) {
  PackedMatrix m;
  PackedMatrixAccess::set(m, rows, cols, hold, grouped_bytes(t, rows, cols));
  grouped_put_rows(t, blocks, 0, rows, rows, cols, PackedMatrixAccess::mut(m));
  return m;
}

PackedMatrix pack_quantized(const void* src, DType st, size_t rows, size_t cols, WeightType hold) {
  const WeightType eff = effective_hold(hold, cols);
  if (!weight_type_quantized(eff)) return PackedMatrix::pack(src, st, rows, cols, eff);
  const GgmlType t = weight_ggml_type(eff);
  const size_t rb = ggml_row_bytes(static_cast<uint32_t>(t), cols);
  auto quantize = [&](size_t r, uint8_t* dst) {
    thread_local std::vector<float> tmp;
    tmp.resize(cols);
    to_f32(static_cast<const uint8_t*>(src) + r * cols * dtype_size(st), st, cols, tmp.data());
    quantize_row(t, tmp.data(), cols, dst);
  };
  PackedMatrix m;  // a group of rows at a time: no second copy of the matrix
  PackedMatrixAccess::set(m, rows, cols, eff, grouped_bytes(t, rows, cols));
  std::vector<uint8_t> group(kGroupRows * rb);
  for (size_t r0 = 0; r0 < rows; r0 += kGroupRows) {
    const size_t n = std::min(kGroupRows, rows - r0);
    for (size_t i = 0; i < n; ++i) quantize(r0 + i, group.data() + i * rb);
    grouped_put_rows(t, group.data(), r0, n, rows, cols, PackedMatrixAccess::mut(m));
  }
  return m;
}
}  // namespace detail

namespace {
// ShapeError unless `type` is a supported ggml type and cols whole blocks of it.
void check_blocks(GgmlType type, size_t cols) {
  if (!ggml_type_supported(type))
    fail<ShapeError>("cannot hold a matrix of ggml type {} (supported: {})",
                     ggml_type_name(static_cast<uint32_t>(type)), kSupportedGgmlTypes);
  const GgmlTypeInfo info = ggml_type_info(static_cast<uint32_t>(type));
  if (cols % info.block_elems != 0)
    fail<ShapeError>("a {} matrix of {} columns is not a whole number of {}-element blocks per row",
                     info.name, cols, info.block_elems);
}
}  // namespace

PackedMatrix PackedMatrix::pack_blocks(const void* blocks, GgmlType type, size_t rows, size_t cols) {
  check_blocks(type, cols);
  if (type == GgmlType::F32) return pack(blocks, DType::F32, rows, cols, WeightType::F32);
  if (type == GgmlType::F16) return pack(blocks, DType::F16, rows, cols, WeightType::F32);
  if (type == GgmlType::BF16) return pack(blocks, DType::BF16, rows, cols, WeightType::BF16);
  return detail::hold_blocks(static_cast<const uint8_t*>(blocks), type, hold_of(type), rows, cols);
}

PackedMatrix PackedMatrix::view(const void* data, GgmlType type, size_t rows, size_t cols,
                               std::shared_ptr<const void> owner) {
  check_blocks(type, cols);
  PackedMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  m.hold_ = type == GgmlType::F16 ? WeightType::F16 : hold_of(type);
  m.bytes_ = rows * ggml_row_bytes(static_cast<uint32_t>(type), cols);
  m.view_ = true;
  // Shares `owner`'s count; never freed through this pointer.
  m.data_ = std::shared_ptr<uint8_t[]>(std::move(owner),
                                       static_cast<uint8_t*>(const_cast<void*>(data)));
  return m;
}

void PackedMatrix::row_blocks(size_t r, uint8_t* out) const {
  if (parts_) {
    for (const auto& p : *parts_) {
      if (r < p.rows()) return p.row_blocks(r, out);
      r -= p.rows();
    }
    fail<ShapeError>("row_blocks: row {} out of range", r);
  }
  if (!weight_type_quantized(hold_))
    fail<ShapeError>("row_blocks: a {} matrix is not held as ggml blocks", weight_type_name(hold_));
  if (r >= rows_) fail<ShapeError>("row_blocks: row {} of {}", r, rows_);
  if (view_) {
    const size_t rb = ggml_row_bytes(static_cast<uint32_t>(weight_ggml_type(hold_)), cols_);
    std::memcpy(out, data_.get() + r * rb, rb);
    return;
  }
  detail::grouped_gather_row(weight_ggml_type(hold_), data_.get(), rows_, cols_, r, out);
}

}  // namespace mtp::kernels
