// ggml block formats: reference dequantizer and our quantizer (quant_blocks.h).
#include "kernels/quant_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

// The dequantizer is the format definition: every product and sum rounded as
// written (no contraction into FMA), identically in every build.
#pragma GCC optimize("fp-contract=off")

namespace mtp::kernels {
namespace {

float ld16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
void st16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// fp16 bits of the smallest half >= v (v >= 0, finite): scales rounded up so
// that the largest |x| of a block never needs more than the top code.
uint16_t f16_round_up(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) < v) ++h;
  return h;
}

// fp16 bits of the largest half <= v (finite, |v| < 65504): one step toward
// −inf from the nearest half where that lies above v.
uint16_t f16_round_down(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) > v) h = static_cast<uint16_t>(h & 0x8000 ? h + 1 : h == 0 ? 0x8001 : h - 1);
  return h;
}

float round_clamp(float v, float lo, float hi) {
  return std::min(hi, std::max(lo, std::nearbyint(v)));
}

// ---- dequantize one block ----
void deq_q8_0(const uint8_t* b, float* y) {
  const float d = ld16(b);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(static_cast<int8_t>(b[2 + i]));
}
void deq_q4_0(const uint8_t* b, float* y) {
  const float d = ld16(b);
  const uint8_t* qs = b + 2;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>((qs[i] & 15) - 8);
    y[i + 16] = d * static_cast<float>((qs[i] >> 4) - 8);
  }
}
void deq_q5_0(const uint8_t* b, float* y) {
  const float d = ld16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 15) | static_cast<int>(((qh >> i) & 1) << 4);
    const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4);
    y[i] = d * static_cast<float>(lo - 16);
    y[i + 16] = d * static_cast<float>(hi - 16);
  }
}
// Q4_1 (qh == nullptr) and Q5_1: x = d·q + m, q unsigned (ggml's order: the
// product, then the sum).
void deq_min1(const uint8_t* b, const uint8_t* qh_at, const uint8_t* qs, float* y) {
  const float d = ld16(b), m = ld16(b + 2);
  uint32_t qh = 0;
  if (qh_at) std::memcpy(&qh, qh_at, 4);
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 15) | static_cast<int>(((qh >> i) & 1) << 4);
    const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4);
    y[i] = d * static_cast<float>(lo) + m;
    y[i + 16] = d * static_cast<float>(hi) + m;
  }
}
// Q4_K (qh == nullptr) and Q5_K.
void deq_k45(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = ld16(b), dmin = ld16(b + 2);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, h = (e % 64) / 32, l = e % 32, j = 2 * c + h;
    uint8_t sc, m;
    scale_min_k4(b + 4, j, &sc, &m);
    int q = h ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
    if (qh && (qh[l] >> j & 1)) q += 16;
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    y[e] = d1 * static_cast<float>(q) - m1;
  }
}
// Element n of a Q6_K block: n = 128h + 32k + l.
int q6_code(const uint8_t* ql, const uint8_t* qh, int n) {
  const int h = n / 128, k = (n % 128) / 32, l = n % 32;
  const uint8_t lo = ql[64 * h + l + 32 * (k & 1)];
  const int low4 = k < 2 ? lo & 15 : lo >> 4;
  const int high2 = (qh[32 * h + l] >> (2 * k)) & 3;
  return low4 | high2 << 4;
}
void deq_q6_k(const uint8_t* b, float* y) {
  const uint8_t *ql = b, *qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = ld16(b + 208);
  for (int n = 0; n < 256; ++n)
    y[n] = d * static_cast<float>(sc[n / 16]) * static_cast<float>(q6_code(ql, qh, n) - 32);
}

// ---- quantize one block ----
void q_q8_0(const float* x, uint8_t* b) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t dh = f16_round_up(amax / 127.f);
  st16(b, dh);
  const float d = f16_to_f32(dh);
  for (int i = 0; i < 32; ++i)
    b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(d > 0 ? round_clamp(x[i] / d, -127, 127) : 0));
}
// Q4_0 (levels 16, offset 8) and Q5_0 (32, 16): returns the codes in q[32].
void q_sym(const float* x, int offset, uint8_t* b, int* q) {
  float amax = 0, mx = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), mx = x[i];
  const uint16_t dh = f32_to_f16(mx / static_cast<float>(-offset));
  st16(b, dh);
  const float d = f16_to_f32(dh);
  for (int i = 0; i < 32; ++i)
    q[i] = d != 0 ? static_cast<int>(round_clamp(x[i] / d, -offset, offset - 1)) + offset : offset;
}
void q_q4_0(const float* x, uint8_t* b) {
  int q[32];
  q_sym(x, 8, b, q);
  for (int i = 0; i < 16; ++i) b[2 + i] = static_cast<uint8_t>(q[i] | q[i + 16] << 4);
}
void q_q5_0(const float* x, uint8_t* b) {
  int q[32];
  q_sym(x, 16, b, q);
  uint32_t qh = 0;
  for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>(q[i] >> 4) << i;
  std::memcpy(b + 2, &qh, 4);
  for (int i = 0; i < 16; ++i) b[6 + i] = static_cast<uint8_t>((q[i] & 15) | (q[i + 16] & 15) << 4);
}
// Q4_1 (levels 15, qh == nullptr) and Q5_1 (31): m = the block's minimum
// rounded down to fp16 (no value lies below it), d = (max − m)/levels
// rounded up to fp16 (none lies above m + d·levels before rounding), q =
// nearest code, clamped.
void q_min1(const float* x, int levels, uint8_t* b, uint8_t* qh_at, uint8_t* qs) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < 32; ++i) mn = std::min(mn, x[i]), mx = std::max(mx, x[i]);
  const uint16_t mh = f16_round_down(mn);
  const float m = f16_to_f32(mh);
  const uint16_t dh = f16_round_up((mx - m) / static_cast<float>(levels));
  const float d = f16_to_f32(dh);
  st16(b, dh);
  st16(b + 2, mh);
  int q[32];
  for (int i = 0; i < 32; ++i)
    q[i] = d > 0 ? static_cast<int>(round_clamp((x[i] - m) / d, 0, static_cast<float>(levels))) : 0;
  uint32_t qh = 0;
  for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>(q[i] >> 4) << i;
  if (qh_at) std::memcpy(qh_at, &qh, 4);
  for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>((q[i] & 15) | (q[i + 16] & 15) << 4);
}
}  // namespace

void pack_scale_min_k4(const uint8_t* sc, const uint8_t* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | (m[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

namespace {
// Q4_K (levels 15, qh == nullptr) and Q5_K (31).
void q_k45(const float* x, int levels, uint8_t* b, uint8_t* qh, uint8_t* qs) {
  float mn[8], mx[8];
  float maxneg = 0;
  for (int j = 0; j < 8; ++j) {
    mn[j] = 0;
    mx[j] = x[32 * j];
    for (int i = 0; i < 32; ++i) mn[j] = std::min(mn[j], x[32 * j + i]), mx[j] = std::max(mx[j], x[32 * j + i]);
    maxneg = std::max(maxneg, -mn[j]);
  }
  const uint16_t dminh = f16_round_up(maxneg / 63.f);
  const float dmin = f16_to_f32(dminh);
  uint8_t m[8], sc[8];
  float dm[8], need[8], need_max = 0;
  for (int j = 0; j < 8; ++j) {
    m[j] = dmin > 0 ? static_cast<uint8_t>(std::min(63.f, std::ceil(-mn[j] / dmin))) : 0;
    dm[j] = dmin * static_cast<float>(m[j]);  // the value is d1·q − dm
    need[j] = (mx[j] + dm[j]) / static_cast<float>(levels);
    need_max = std::max(need_max, need[j]);
  }
  const uint16_t dh = f16_round_up(need_max / 63.f);
  const float d = f16_to_f32(dh);
  st16(b, dh);
  st16(b + 2, dminh);
  for (int j = 0; j < 8; ++j) sc[j] = d > 0 ? static_cast<uint8_t>(std::min(63.f, std::ceil(need[j] / d))) : 0;
  pack_scale_min_k4(sc, m, b + 4);
  if (qh) std::memset(qh, 0, 32);
  std::memset(qs, 0, 128);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, h = (e % 64) / 32, l = e % 32, j = 2 * c + h;
    const float step = d * static_cast<float>(sc[j]);
    const int q = step > 0 ? static_cast<int>(round_clamp((x[e] + dm[j]) / step, 0, levels)) : 0;
    qs[32 * c + l] |= static_cast<uint8_t>((q & 15) << (4 * h));
    if (qh) qh[l] |= static_cast<uint8_t>((q >> 4) << j);
  }
}
void q_q6_k(const float* x, uint8_t* b) {
  float s[16], smax = 0;
  for (int j = 0; j < 16; ++j) {
    float amax = 0;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[16 * j + i]));
    s[j] = amax / 31.f;
    smax = std::max(smax, s[j]);
  }
  const uint16_t dh = f16_round_up(smax / 127.f);
  const float d = f16_to_f32(dh);
  uint8_t *ql = b, *qh = b + 128;
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  std::memset(b, 0, 192);
  for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(d > 0 ? std::min(127.f, std::ceil(s[j] / d)) : 0);
  st16(b + 208, dh);
  for (int n = 0; n < 256; ++n) {
    const float step = d * static_cast<float>(sc[n / 16]);
    const int q = (step > 0 ? static_cast<int>(round_clamp(x[n] / step, -32, 31)) : 0) + 32;
    const int h = n / 128, k = (n % 128) / 32, l = n % 32;
    ql[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>((q & 15) << (k < 2 ? 0 : 4));
    qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
  }
}

GgmlTypeInfo checked_info(GgmlType t, size_t n, const char* what) {
  const GgmlTypeInfo i = ggml_type_info(static_cast<uint32_t>(t));
  if (!ggml_type_supported(t))
    fail<ShapeError>("{}: ggml type {} is not supported", what, ggml_type_name(static_cast<uint32_t>(t)));
  if (n % i.block_elems != 0)
    fail<ShapeError>("{}: a {} row of {} elements is not a whole number of {}-element blocks", what,
                     i.name, n, i.block_elems);
  return i;
}
}  // namespace

bool ggml_type_quantized(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q5_0:
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: return true;
    default: return false;
  }
}

bool ggml_type_supported(GgmlType t) {
  return ggml_type_quantized(t) || t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

void scale_min_k4(const uint8_t* q, size_t j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 15) | (q[j - 4] >> 6) << 4);
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | (q[j] >> 6) << 4);
  }
}

void dequantize_row(GgmlType t, const void* src, size_t n, float* out) {
  const GgmlTypeInfo info = checked_info(t, n, "dequantize_row");
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case GgmlType::F32: std::memcpy(out, s, n * 4); return;
    case GgmlType::F16: to_f32(s, DType::F16, n, out); return;
    case GgmlType::BF16: to_f32(s, DType::BF16, n, out); return;
    default: break;
  }
  for (size_t b = 0; b < n / info.block_elems; ++b, s += info.block_bytes, out += info.block_elems) {
    switch (t) {
      case GgmlType::Q8_0: deq_q8_0(s, out); break;
      case GgmlType::Q4_0: deq_q4_0(s, out); break;
      case GgmlType::Q5_0: deq_q5_0(s, out); break;
      case GgmlType::Q4_1: deq_min1(s, nullptr, s + 4, out); break;
      case GgmlType::Q5_1: deq_min1(s, s + 4, s + 8, out); break;
      case GgmlType::Q4_K: deq_k45(s, nullptr, s + 16, out); break;
      case GgmlType::Q5_K: deq_k45(s, s + 16, s + 48, out); break;
      default: deq_q6_k(s, out); break;
    }
  }
}

std::optional<NonFiniteScale> find_nonfinite_scale(GgmlType t, const void* src, size_t rows,
                                                   size_t n) {
  const GgmlTypeInfo info = checked_info(t, n, "find_nonfinite_scale");
  MTP_CHECK(ggml_type_quantized(t), "find_nonfinite_scale: not a block type");
  // Byte offsets of the fp16 scale fields in one block (quant_blocks.h layouts).
  struct Field { size_t at; const char* name; };
  Field fields[2] = {{0, "d"}, {2, "m"}};
  size_t n_fields = 1;
  if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) n_fields = 2;
  if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) fields[1].name = "dmin", n_fields = 2;
  if (t == GgmlType::Q6_K) fields[0].at = 208;
  const auto* s = static_cast<const uint8_t*>(src);
  const size_t per_row = n / info.block_elems, total = rows * per_row;
  for (size_t b = 0; b < total; ++b, s += info.block_bytes) {
    for (size_t f = 0; f < n_fields; ++f) {
      uint16_t h;
      std::memcpy(&h, s + fields[f].at, 2);
      if ((h & 0x7c00) == 0x7c00) return NonFiniteScale{b / per_row, b % per_row, fields[f].name, f16_to_f32(h)};
    }
  }
  return std::nullopt;
}

void quantize_row(GgmlType t, const float* x, size_t n, void* dst) {
  const GgmlTypeInfo info = checked_info(t, n, "quantize_row");
  MTP_CHECK(ggml_type_quantized(t), "quantize_row: not a block type");
  auto* b = static_cast<uint8_t*>(dst);
  for (size_t k = 0; k < n / info.block_elems; ++k, b += info.block_bytes, x += info.block_elems) {
    switch (t) {
      case GgmlType::Q8_0: q_q8_0(x, b); break;
      case GgmlType::Q4_0: q_q4_0(x, b); break;
      case GgmlType::Q5_0: q_q5_0(x, b); break;
      case GgmlType::Q4_1: q_min1(x, 15, b, nullptr, b + 4); break;
      case GgmlType::Q5_1: q_min1(x, 31, b, b + 4, b + 8); break;
      case GgmlType::Q4_K: q_k45(x, 15, b, nullptr, b + 16); break;
      case GgmlType::Q5_K: q_k45(x, 31, b, b + 16, b + 48); break;
      default: q_q6_k(x, b); break;
    }
  }
}

}  // namespace mtp::kernels
