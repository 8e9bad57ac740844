// The grouped layout of grouped_blocks.h: interleaving GGUF rows and gathering
// them back (both exact byte moves; Q4_K's scales unpacked and packed again,
// a bijection).
#include "kernels/grouped_blocks.h"

#include <cstring>

#include "core/error.h"
#include "core/ggml_type.h"
#include "kernels/quant_blocks.h"

namespace mtp::kernels::detail {
namespace {
// Where one block of row r, block b lives in both layouts.
struct Place {
  size_t meta;    // the (group, block)'s meta (grouped_blocks.h)
  size_t code;    // the row's first code byte; quad n is 64n further
  size_t i;       // row within the group
};
// A held type's GGUF block: its bytes, where its code bytes start and how
// many (one quad per group row on each of the held lines), where its d is.
// Q5_0/Q5_1: qh_at, the 4 qh bytes (held permuted on the last line, not
// moved with the code bytes); Q4_1/Q5_1: m_at, the min.
struct Form {
  size_t block_bytes, code_at, n_code;
  uint8_t flip;  // Q8_0: held as c + 128
  size_t d_at;
  int qh_at = -1, m_at = -1;
};
// Checks the type once per call of the two entry points below.
Form form(GgmlType t) {
  MTP_CHECK(ggml_type_quantized(t), "grouped layout of a type that is not a block type");
  const size_t bytes = ggml_row_bytes(static_cast<uint32_t>(t), group_block_elems(t));
  const size_t n_code = group_code_bytes(t) / kGroupRows;
  switch (t) {
    case GgmlType::Q8_0: return {bytes, 2, n_code, 0x80, 0};    // d, qs
    case GgmlType::Q6_K: return {bytes, 0, n_code, 0, 208};     // ql, qh, scales, d
    case GgmlType::Q4_0: return {bytes, 2, n_code, 0, 0};       // d, qs
    case GgmlType::Q4_1: return {bytes, 4, n_code, 0, 0, -1, 2};  // d, m, qs
    case GgmlType::Q5_0: return {bytes, 6, 16, 0, 0, 2, -1};    // d, qh, qs
    case GgmlType::Q5_1: return {bytes, 8, 16, 0, 0, 4, 2};     // d, m, qh, qs
    default: return {bytes, 16, n_code, 0, 0};  // Q4_K: d, dmin, scales[12], qs; Q5_K: qh[32] before qs
  }
}
Place place(GgmlType t, size_t rows, size_t cols, size_t r, size_t b) {
  const size_t nb = cols / group_block_elems(t), g = r / kGroupRows, i = r % kGroupRows;
  return {grouped_meta_offset(t, rows, cols) + (g * nb + b) * group_meta_bytes(t),
          (g * nb + b) * group_code_bytes(t) + 4 * i, i};
}
// Where code byte n of the row's GGUF block is held: quad n / 4 (Q5_K: qh
// bytes 0..31 on lines 32.., qs bytes on lines 0..31; Q6_K: ql
// bytes 64h + 32s + 4t + e on line (8h + t)·3 + s, qh bytes 32h + 4t + e on
// line (8h + t)·3 + 2).
size_t code_at(GgmlType t, const Place& p, size_t n) {
  size_t line = n / 4;
  if (t == GgmlType::Q5_K) line = n < 32 ? 32 + n / 4 : (n - 32) / 4;  // qh quads after qs
  if (t == GgmlType::Q6_K) {
    const bool ql = n < 128;
    const size_t x = ql ? n : n - 128, h = ql ? x / 64 : x / 32, s = ql ? x % 64 / 32 : 2;
    line = (8 * h + x % 32 / 4) * 3 + s;
  }
  return p.code + line * 4 * kGroupRows + n % 4;
}

// Q4_K's and Q5_K's meta of one row: dmin and the unpacked scales and mins.
void put_k_meta(const uint8_t* src, const Place& p, uint8_t* dst) {
  uint8_t sc[8], m[8];
  unpack_scales_k4(src + 4, sc, m);
  uint8_t* meta = dst + p.meta;
  std::memcpy(meta + 32 + 2 * p.i, src + 2, 2);
  for (size_t j = 0; j < 8; ++j) {
    meta[64 + 16 * j + p.i] = sc[j];
    meta[192 + 32 * (j / 2) + 2 * p.i + j % 2] = m[j];
  }
}
void gather_k_meta(const uint8_t* held, const Place& p, uint8_t* out) {
  uint8_t sc[8], m[8];
  const uint8_t* meta = held + p.meta;
  std::memcpy(out + 2, meta + 32 + 2 * p.i, 2);
  for (size_t j = 0; j < 8; ++j) {
    sc[j] = meta[64 + 16 * j + p.i];
    m[j] = meta[192 + 32 * (j / 2) + 2 * p.i + j % 2];
  }
  pack_scale_min_k4(sc, m, out + 4);
}
}  // namespace

void grouped_put_rows(GgmlType t, const uint8_t* blocks, size_t r0, size_t n, size_t rows,
                      size_t cols, uint8_t* dst) {
  MTP_CHECK(r0 + n <= rows, "grouped_put_rows: rows [{}, {}) of {}", r0, r0 + n, rows);
  const Form f = form(t);
  const size_t nb = cols / group_block_elems(t);
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* src = blocks + (i * nb + b) * f.block_bytes;
      const Place p = place(t, rows, cols, r0 + i, b);
      std::memcpy(dst + p.meta + 2 * p.i, src + f.d_at, 2);  // d
      if (f.m_at >= 0) std::memcpy(dst + p.meta + 32 + 2 * p.i, src + f.m_at, 2);
      if (f.qh_at >= 0) {
        uint32_t qh;
        std::memcpy(&qh, src + f.qh_at, 4);
        qh = qh_hold(qh);
        std::memcpy(dst + p.code + 4 * 4 * kGroupRows, &qh, 4);  // line 4
      }
      if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) put_k_meta(src, p, dst);
      if (t == GgmlType::Q6_K)
        for (size_t j = 0; j < 16; ++j) dst[p.meta + 32 + 16 * j + p.i] = src[192 + j];
      for (size_t c = 0; c < f.n_code; ++c)
        dst[code_at(t, p, c)] = static_cast<uint8_t>(src[f.code_at + c] ^ f.flip);
    }
}

void grouped_gather_row(GgmlType t, const uint8_t* held, size_t rows, size_t cols, size_t r,
                        uint8_t* out) {
  const Form f = form(t);
  for (size_t b = 0; b < cols / group_block_elems(t); ++b) {
    uint8_t* dst = out + b * f.block_bytes;
    const Place p = place(t, rows, cols, r, b);
    std::memcpy(dst + f.d_at, held + p.meta + 2 * p.i, 2);
    if (f.m_at >= 0) std::memcpy(dst + f.m_at, held + p.meta + 32 + 2 * p.i, 2);
    if (f.qh_at >= 0) {
      uint32_t w;
      std::memcpy(&w, held + p.code + 4 * 4 * kGroupRows, 4);
      w = qh_gguf(w);
      std::memcpy(dst + f.qh_at, &w, 4);
    }
    if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) gather_k_meta(held, p, dst);
    if (t == GgmlType::Q6_K)
      for (size_t j = 0; j < 16; ++j) dst[192 + j] = held[p.meta + 32 + 16 * j + p.i];
    for (size_t c = 0; c < f.n_code; ++c)
      dst[f.code_at + c] = static_cast<uint8_t>(held[code_at(t, p, c)] ^ f.flip);
  }
}

}  // namespace mtp::kernels::detail
