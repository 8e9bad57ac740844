// Activation quantization and the scalar reference of the quantized dot
// product (quant_dot.h states the contract this implements literally).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot.h"

#pragma GCC optimize("fp-contract=off")

namespace mtp::kernels::detail {
namespace {

float ld16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Whether a 32-element type has a min (x = d·q + m).
bool has_min(GgmlType t) { return t == GgmlType::Q4_1 || t == GgmlType::Q5_1; }

// Codes of a 32-element block: signed (value = d · code) for Q8_0, Q4_0,
// Q5_0; the unsigned q for Q4_1, Q5_1 (value = d · q + m).
void codes32(GgmlType t, const uint8_t* b, int* c) {
  if (t == GgmlType::Q8_0) {
    for (int i = 0; i < 32; ++i) c[i] = static_cast<int8_t>(b[2 + i]);
    return;
  }
  uint32_t qh = 0;
  const uint8_t* qs = b + 2;
  if (t == GgmlType::Q5_0) std::memcpy(&qh, b + 2, 4), qs = b + 6;
  if (t == GgmlType::Q4_1) qs = b + 4;
  if (t == GgmlType::Q5_1) std::memcpy(&qh, b + 4, 4), qs = b + 8;
  const int off = t == GgmlType::Q5_0 ? 16 : t == GgmlType::Q4_0 ? 8 : 0;
  for (int i = 0; i < 16; ++i) {
    c[i] = ((qs[i] & 15) | static_cast<int>((qh >> i & 1) << 4)) - off;
    c[i + 16] = ((qs[i] >> 4) | static_cast<int>((qh >> (i + 16) & 1) << 4)) - off;
  }
}

// nearbyint(v) clamped to [-127, 127], for |v| <= 127·(1 + 2^-23) (v = x·127/amax):
// adding and subtracting 1.5·2^23 rounds to the nearest integer, ties to even,
// exactly as nearbyint in the default rounding mode (fp-contract is off), and
// unlike the libm call it vectorizes (quantize_act runs once per product).
float round_code(float v) {
  constexpr float kMagic = 12582912.f;  // 1.5 · 2^23
  const float r = (v + kMagic) - kMagic;
  return std::min(127.f, std::max(-127.f, r));
}

// Rows [r0, r0 + n) of a against one weight row: each block decoded once.
void dot32(GgmlType t, const uint8_t* w, const QuantAct& a, size_t r0, size_t n, float* out) {
  const size_t bb = ggml_type_info(static_cast<uint32_t>(t)).block_bytes;
  for (size_t r = 0; r < n; ++r) out[r] = 0.f;
  int c[32];
  for (size_t b = 0; b < a.cols / 32; ++b, w += bb) {
    codes32(t, w, c);
    const float dw = ld16(w), mw = has_min(t) ? ld16(w + 2) : 0.f;
    for (size_t r = 0; r < n; ++r) {
      const int8_t* xq = a.qrow(r0 + r) + 32 * b;
      const float dx = a.drow(r0 + r)[b];
      int32_t p = 0, sx = 0;
      for (int i = 0; i < 32; ++i) p += c[i] * xq[i], sx += xq[i];
      out[r] = std::fma(static_cast<float>(p), dw * dx, out[r]);
      if (has_min(t)) out[r] = std::fma(static_cast<float>(sx), mw * dx, out[r]);
    }
  }
}

// K types (one lane each, quant_dot.h): unsigned codes q[256] and the integer
// scales; Q4_K/Q5_K also their mins.
void dotk(GgmlType t, const uint8_t* w, const QuantAct& a, size_t r0, size_t n, float* out) {
  const size_t bb = ggml_type_info(static_cast<uint32_t>(t)).block_bytes;
  thread_local std::vector<float> acc;
  acc.assign(n, 0.f);
  for (size_t sb = 0; sb < a.cols / 256; ++sb, w += bb) {
    int q[256];
    int sc[16];  // Q6_K: 16 signed scales; Q4_K/Q5_K: 8 (sub-blocks of 32)
    uint8_t mins[8] = {};
    float d, dmin = 0;
    if (t == GgmlType::Q6_K) {
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t lo = w[64 * h + l + 32 * (k & 1)];
        q[e] = (k < 2 ? lo & 15 : lo >> 4) | ((w[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
      }
      for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(w[192 + j]);
      d = ld16(w + 208);
    } else {
      const uint8_t* qh = t == GgmlType::Q5_K ? w + 16 : nullptr;
      const uint8_t* qs = qh ? w + 48 : w + 16;
      for (size_t j = 0; j < 8; ++j) {
        uint8_t s8;
        scale_min_k4(w + 4, j, &s8, &mins[j]);
        sc[j] = s8;
      }
      for (int e = 0; e < 256; ++e) {
        const int c = e / 64, h = (e % 64) / 32, l = e % 32, j = 2 * c + h;
        q[e] = (h ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15) | (qh ? (qh[l] >> j & 1) << 4 : 0);
      }
      d = ld16(w);
      dmin = ld16(w + 2);
    }
    for (size_t r = 0; r < n; ++r) {
      const int8_t* xq = a.qrow(r0 + r) + 256 * sb;
      const float dx = a.drow(r0 + r)[sb];
      int32_t p = 0, msum = 0;
      if (t == GgmlType::Q6_K) {
        const int16_t* b16 = a.brow(r0 + r) + 16 * sb;
        for (int j = 0; j < 16; ++j) {
          int32_t part = -32 * b16[j];  // Σ (q − 32)·xq
          for (int i = 16 * j; i < 16 * j + 16; ++i) part += q[i] * xq[i];
          p += sc[j] * part;
        }
      } else {
        const int16_t* b32 = a.b32row(r0 + r) + 8 * sb;
        for (int j = 0; j < 8; ++j) {
          int32_t part = 0;
          for (int i = 32 * j; i < 32 * j + 32; ++i) part += q[i] * xq[i];
          p += sc[j] * part;
          msum += static_cast<int32_t>(mins[j]) * b32[j];
        }
      }
      acc[r] = std::fma(static_cast<float>(p), d * dx, acc[r]);
      if (t != GgmlType::Q6_K) acc[r] = std::fma(static_cast<float>(msum), -dmin * dx, acc[r]);
    }
  }
  for (size_t r = 0; r < n; ++r) out[r] = acc[r];
}
}  // namespace

size_t act_block(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K ? 256 : 32;
}

int act_xcorr_factor(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return -128;
    case GgmlType::Q4_0: return -8;
    case GgmlType::Q5_0: return -16;
    case GgmlType::Q4_1: case GgmlType::Q5_1: return 1;
    default: return 0;
  }
}

void act_prepare(GgmlType t, size_t rows, size_t cols, QuantAct& out) {
  const size_t ab = act_block(t);
  MTP_CHECK(cols % ab == 0, "quantize_act: cols {} not a multiple of {}", cols, ab);
  out.rows = rows, out.cols = cols, out.ab = ab;
  out.q.resize(rows * cols);
  out.d.resize(rows * cols / ab);
  out.bsum.resize(ab == 256 ? rows * cols / 16 : 0);
  out.bsum32.resize(out.bsum.size() / 2);
  out.xcorr.resize(ab == 32 ? rows * cols / 32 : 0);
}

void act_sums(GgmlType t, size_t r, QuantAct& out) {
  const size_t cols = out.cols;
  const int8_t* __restrict q = out.qrow(r);
  if (!out.xcorr.empty()) {
    const int f = act_xcorr_factor(t);
    int32_t* __restrict xc = out.xcorr.data() + r * (cols / 32);
    for (size_t b = 0; b < cols / 32; ++b) {
      int s = 0;
      for (size_t i = 32 * b; i < 32 * b + 32; ++i) s += q[i];
      xc[b] = f * s;
    }
  }
  if (out.ab == 256) {
    int16_t* __restrict bs = out.bsum.data() + r * (cols / 16);
    for (size_t g = 0; g < cols / 16; ++g) {
      int s = 0;
      for (size_t i = 16 * g; i < 16 * g + 16; ++i) s += q[i];
      bs[g] = static_cast<int16_t>(s);
    }
    int16_t* __restrict b32 = out.bsum32.data() + r * (cols / 32);
    for (size_t j = 0; j < cols / 32; ++j) b32[j] = static_cast<int16_t>(bs[2 * j] + bs[2 * j + 1]);
  }
}

void quantize_act_ref(GgmlType t, const float* x, size_t x_stride, size_t rows, size_t cols,
                      QuantAct& out) {
  act_prepare(t, rows, cols, out);
  const size_t ab = out.ab;
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * x_stride;
    int8_t* q = out.q.data() + r * cols;
    for (size_t b = 0; b < cols / ab; ++b) {
      float amax = 0;
      for (size_t i = b * ab; i < (b + 1) * ab; ++i) amax = std::max(amax, std::fabs(xr[i]));
      const float inv = amax > 0 ? 127.f / amax : 0.f;
      out.d[r * (cols / ab) + b] = amax / 127.f;
      for (size_t i = b * ab; i < (b + 1) * ab; ++i)
        q[i] = static_cast<int8_t>(round_code(xr[i] * inv));
    }
    act_sums(t, r, out);
  }
}

void quant_dot_ref_rows(GgmlType t, const uint8_t* w, const QuantAct& a, size_t r0, size_t n,
                        float* out) {
  if (a.ab == 32) return dot32(t, w, a, r0, n, out);
  dotk(t, w, a, r0, n, out);
}

float quant_dot_ref(GgmlType t, const uint8_t* w, const QuantAct& a, size_t r) {
  float y;
  quant_dot_ref_rows(t, w, a, r, 1, &y);
  return y;
}

}  // namespace mtp::kernels::detail
