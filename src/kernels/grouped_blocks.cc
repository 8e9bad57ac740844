// The grouped layout of grouped_blocks.h: interleaving GGUF rows and gathering
// them back (both exact byte moves).
#include "kernels/grouped_blocks.h"

#include <cstring>

#include "core/error.h"

namespace mtp::kernels::detail {
namespace {
// One block of row r, block b in both layouts: its GGUF bytes (d fp16, then
// 32 code bytes for Q8_0 or 16 qs bytes for Q4_0), its scale's offset in the
// held matrix and the offset of its first code byte (the next 4-byte group
// of the row is kGroupRows·4 bytes further).
struct Place {
  size_t scale, code, n_code;  // n_code: code bytes of the GGUF block (32 or 16)
  bool flip;                   // Q8_0: held as c + 128
};
Place place(GgmlType t, size_t rows, size_t cols, size_t r, size_t b) {
  const size_t nb = cols / 32, g = r / kGroupRows, i = r % kGroupRows;
  return {grouped_scales_offset(t, rows, cols) + (g * nb + b) * kGroupScaleBytes + 2 * i,
          (g * nb + b) * group_code_bytes(t) + 4 * i, t == GgmlType::Q8_0 ? 32u : 16u,
          t == GgmlType::Q8_0};
}
// GGUF bytes per block; checks the type once per call of the two below.
size_t block_bytes(GgmlType t) {
  MTP_CHECK(held_grouped(t), "grouped layout of a type that is not Q8_0 or Q4_0");
  return t == GgmlType::Q8_0 ? 34 : 18;
}
}  // namespace

void grouped_put_rows(GgmlType t, const uint8_t* blocks, size_t r0, size_t n, size_t rows,
                      size_t cols, uint8_t* dst) {
  MTP_CHECK(r0 + n <= rows, "grouped_put_rows: rows [{}, {}) of {}", r0, r0 + n, rows);
  const size_t nb = cols / 32, bb = block_bytes(t);
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* src = blocks + (i * nb + b) * bb;
      const Place p = place(t, rows, cols, r0 + i, b);
      std::memcpy(dst + p.scale, src, 2);
      const uint8_t x = p.flip ? 0x80 : 0;
      for (size_t n = 0; n < p.n_code; ++n)
        dst[p.code + n / 4 * 4 * kGroupRows + n % 4] = static_cast<uint8_t>(src[2 + n] ^ x);
    }
}

void grouped_gather_row(GgmlType t, const uint8_t* held, size_t rows, size_t cols, size_t r,
                        uint8_t* out) {
  const size_t bb = block_bytes(t);
  for (size_t b = 0; b < cols / 32; ++b) {
    uint8_t* dst = out + b * bb;
    const Place p = place(t, rows, cols, r, b);
    std::memcpy(dst, held + p.scale, 2);
    const uint8_t x = p.flip ? 0x80 : 0;
    for (size_t n = 0; n < p.n_code; ++n)
      dst[2 + n] = static_cast<uint8_t>(held[p.code + n / 4 * 4 * kGroupRows + n % 4] ^ x);
  }
}

}  // namespace mtp::kernels::detail
