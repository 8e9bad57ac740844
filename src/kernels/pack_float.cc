// PackedMatrix of float holds (fp32, bf16, fp16): packing a row-major
// matrix into the kernels' layout (matmul.cc's top comment: blocks of 4 rows,
// superchunks of 32 cols, bf16 interleaved), joining packed parts by rows,
// and reading a row back as fp32. Quantized holds: pack_quant.cc.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/matmul_layout.h"
#include "kernels/packed_access.h"
#include "kernels/quant_blocks.h"

namespace mtp::kernels {

using detail::kBlockRows;
using detail::kSuper;

namespace {
// fp16 bits of a finite fp32 value; InputError where it is beyond fp16's
// range (it would become infinite: --weights fp16 of an fp32 checkpoint).
uint16_t to_f16_checked(float v, size_t r, size_t c) {
  const uint16_t h = f32_to_f16(v);
  if ((h & 0x7C00) == 0x7C00) {
    fail<InputError>("weight {} at row {}, col {} is outside fp16's range (|x| <= 65504): "
                     "hold this matrix as fp32 or bf16", v, r, c);
  }
  return h;
}

// Element offset (in held elements) of row r's 32 elements of superchunk s.
size_t piece_index(size_t r, size_t s, size_t n_blocks, size_t n_super, detail::Elem e) {
  const size_t sc = detail::sc_index(r / kBlockRows, s, n_blocks, n_super,
                                     detail::layout_chunked(n_super, e != detail::Elem::F32));
  return (sc * kBlockRows + r % kBlockRows) * kSuper;
}
// Position of col 32s + t within its piece: fp32 and fp16 in order, bf16
// interleaved (the low 16 cols at even u16 slots, the high 16 at odd ones: matmul.cc).
size_t piece_slot(size_t t, detail::Elem e) {
  if (e != detail::Elem::BF16) return t;
  return t < 16 ? 2 * t : 2 * (t - 16) + 1;
}
}  // namespace

PackedMatrix PackedMatrix::pack(const void* src, DType st, size_t rows, size_t cols,
                                WeightType hold) {
  if (st != DType::F32 && st != DType::BF16 && st != DType::F16)
    fail<ShapeError>("cannot pack a {} matrix (want F32, BF16 or F16)", dtype_name(st));
  if (weight_type_quantized(hold)) return detail::pack_quantized(src, st, rows, cols, hold);
  PackedMatrix m;
  const detail::Elem e = detail::elem_of(hold);
  const size_t ns = detail::n_super_of(cols), nb = (rows + kBlockRows - 1) / kBlockRows;
  PackedMatrixAccess::set(m, rows, cols, hold, nb * ns * kBlockRows * kSuper * detail::elem_bytes(e));
  uint8_t* dst = PackedMatrixAccess::mut(m);
  std::vector<float> tmp(cols);
  const size_t es = dtype_size(st);
  // An exact copy of the stored bits where the hold is the stored type.
  const bool copy = (e == detail::Elem::BF16 && st == DType::BF16) ||
                    (e == detail::Elem::F16 && st == DType::F16);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* s = static_cast<const uint8_t*>(src) + r * cols * es;
    if (!copy) to_f32(s, st, cols, tmp.data());
    for (size_t sc = 0; sc < ns; ++sc) {
      const size_t base = piece_index(r, sc, nb, ns, e), i0 = sc * kSuper;
      const size_t n = std::min(kSuper, cols - i0);
      if (e == detail::Elem::F32) {  // fp32 pieces are cols in order
        std::memcpy(reinterpret_cast<float*>(dst) + base, tmp.data() + i0, n * 4);
        continue;
      }
      auto* d = reinterpret_cast<uint16_t*>(dst) + base;
      for (size_t t = 0; t < n; ++t) {
        uint16_t h;
        if (copy) std::memcpy(&h, s + 2 * (i0 + t), 2);
        else h = e == detail::Elem::BF16 ? f32_to_bf16(tmp[i0 + t]) : to_f16_checked(tmp[i0 + t], r, i0 + t);
        d[piece_slot(t, e)] = h;
      }
    }
  }
  return m;
}

PackedMatrix PackedMatrix::concat_rows(std::vector<PackedMatrix> parts) {
  if (parts.empty()) fail<ShapeError>("concat_rows: no parts");
  if (parts.size() == 1) return std::move(parts[0]);
  PackedMatrix m;
  m.cols_ = parts[0].cols();
  m.hold_ = parts[0].hold();
  for (const auto& p : parts) {
    if (p.cols() != m.cols_)
      fail<ShapeError>("concat_rows: a part has {} columns, the first {}", p.cols(), m.cols_);
    m.rows_ += p.rows();
    m.bytes_ += p.bytes();
  }
  m.parts_ = std::make_shared<const std::vector<PackedMatrix>>(std::move(parts));
  return m;
}

void PackedMatrix::row_f32(size_t r, float* out) const {
  if (parts_) {
    for (const auto& p : *parts_) {
      if (r < p.rows()) return p.row_f32(r, out);
      r -= p.rows();
    }
    fail<ShapeError>("row_f32: row out of range");
  }
  if (weight_type_quantized(hold_)) {
    const GgmlType t = weight_ggml_type(hold_);
    thread_local std::vector<uint8_t> blocks;  // row_f32 runs once per row of a matrix
    blocks.resize(ggml_row_bytes(static_cast<uint32_t>(t), cols_));
    row_blocks(r, blocks.data());
    return dequantize_row(t, blocks.data(), cols_, out);
  }
  if (view_) {  // row-major as stored
    const DType st = hold_ == WeightType::BF16 ? DType::BF16 : hold_ == WeightType::F16 ? DType::F16 : DType::F32;
    return to_f32(data_.get() + r * cols_ * dtype_size(st), st, cols_, out);
  }
  const size_t ns = detail::n_super_of(cols_), nb = (rows_ + kBlockRows - 1) / kBlockRows;
  const detail::Elem e = detail::elem_of(hold_);
  for (size_t sc = 0; sc < ns; ++sc) {
    const size_t base = piece_index(r, sc, nb, ns, e), i0 = sc * kSuper;
    for (size_t t = 0; t < std::min(kSuper, cols_ - i0); ++t) {
      const size_t at = base + piece_slot(t, e);
      const auto* h = reinterpret_cast<const uint16_t*>(data_.get());
      out[i0 + t] = e == detail::Elem::BF16  ? bf16_to_f32(h[at])
                    : e == detail::Elem::F16 ? f16_to_f32(h[at])
                                             : reinterpret_cast<const float*>(data_.get())[at];
    }
  }
}

}  // namespace mtp::kernels
