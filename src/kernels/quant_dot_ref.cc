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

// Signed codes of a 32-element block (value = d · code).
void codes32(GgmlType t, const uint8_t* b, int* c) {
  if (t == GgmlType::Q8_0) {
    for (int i = 0; i < 32; ++i) c[i] = static_cast<int8_t>(b[2 + i]);
    return;
  }
  uint32_t qh = 0;
  const uint8_t* qs = b + 2;
  if (t == GgmlType::Q5_0) std::memcpy(&qh, b + 2, 4), qs = b + 6;
  const int off = t == GgmlType::Q5_0 ? 16 : 8;
  for (int i = 0; i < 16; ++i) {
    c[i] = ((qs[i] & 15) | static_cast<int>((qh >> i & 1) << 4)) - off;
    c[i + 16] = ((qs[i] >> 4) | static_cast<int>((qh >> (i + 16) & 1) << 4)) - off;
  }
}

float tree(float* t, size_t n) {
  for (size_t h = n / 2; h >= 1; h /= 2)
    for (size_t l = 0; l < h; ++l) t[l] = t[l] + t[l + h];
  return t[0];
}

float dot32(GgmlType t, const uint8_t* w, const int8_t* xq, const float* xd, size_t cols) {
  const size_t bb = ggml_type_info(static_cast<uint32_t>(t)).block_bytes;
  float acc[16] = {};
  int c[32];
  for (size_t b = 0; b < cols / 32; ++b, w += bb) {
    codes32(t, w, c);
    const float s = ld16(w) * xd[b];
    for (int l = 0; l < 8; ++l) {
      int32_t p = 0;
      for (int i = 4 * l; i < 4 * l + 4; ++i) p += c[i] * xq[32 * b + i];
      float& a = acc[l + 8 * (b % 2)];
      a = a + static_cast<float>(p) * s;
    }
  }
  return tree(acc, 16) - 0.f;
}

// Unsigned codes q[256] and per-chunk scales of a K block; mins (Q4_K/Q5_K)
// or the 16 int8 scales (Q6_K).
float dotk(GgmlType t, const uint8_t* w, const int8_t* xq, const float* xd, const int16_t* bs,
           size_t cols) {
  const size_t bb = ggml_type_info(static_cast<uint32_t>(t)).block_bytes;
  float acc[8] = {}, macc[8] = {};
  for (size_t sb = 0; sb < cols / 256; ++sb, w += bb, xq += 256, bs += 16) {
    int q[256];
    int sc_of[256];  // the integer scale multiplying element e in P
    int32_t m[8] = {};
    float s, tm;
    if (t == GgmlType::Q6_K) {
      const auto* sc = reinterpret_cast<const int8_t*>(w + 192);
      float d = ld16(w + 208);
      for (int n = 0; n < 256; ++n) {
        const int h = n / 128, k = (n % 128) / 32, l = n % 32;
        const uint8_t lo = w[64 * h + l + 32 * (k & 1)];
        q[n] = (k < 2 ? lo & 15 : lo >> 4) | ((w[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
        sc_of[n] = sc[n / 16];
      }
      for (int l = 0; l < 8; ++l) m[l] = 32 * (sc[2 * l] * bs[2 * l] + sc[2 * l + 1] * bs[2 * l + 1]);
      s = tm = d * xd[sb];
    } else {
      const uint8_t* qh = t == GgmlType::Q5_K ? w + 16 : nullptr;
      const uint8_t* qs = qh ? w + 48 : w + 16;
      for (int e = 0; e < 256; ++e) {
        const int c = e / 64, h = (e % 64) / 32, l = e % 32, j = 2 * c + h;
        q[e] = (h ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15) | (qh ? (qh[l] >> j & 1) << 4 : 0);
        uint8_t sc, mn;
        scale_min_k4(w + 4, static_cast<size_t>(j), &sc, &mn);
        sc_of[e] = sc;
        if (e % 32 == 0) m[j] = mn * (bs[2 * j] + bs[2 * j + 1]);
      }
      s = ld16(w) * xd[sb];
      tm = ld16(w + 2) * xd[sb];
    }
    for (int l = 0; l < 8; ++l) {
      int32_t p = 0;
      for (int c = 0; c < 8; ++c) {
        int32_t part = 0;
        for (int i = 32 * c + 4 * l; i < 32 * c + 4 * l + 4; ++i) part += q[i] * xq[i];
        p += sc_of[32 * c + 4 * l] * part;
      }
      acc[l] = acc[l] + static_cast<float>(p) * s;
      macc[l] = macc[l] + static_cast<float>(m[l]) * tm;
    }
  }
  return tree(acc, 8) - tree(macc, 8);
}
}  // namespace

size_t act_block(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K ? 256 : 32;
}

void quantize_act(GgmlType t, const float* x, size_t x_stride, size_t rows, size_t cols,
                  QuantAct& out) {
  const size_t ab = act_block(t);
  MTP_CHECK(cols % ab == 0, "quantize_act: cols {} not a multiple of {}", cols, ab);
  out.rows = rows, out.cols = cols, out.ab = ab;
  out.q.resize(rows * cols);
  out.d.resize(rows * cols / ab);
  out.bsum.resize(ab == 256 ? rows * cols / 16 : 0);
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * x_stride;
    int8_t* q = out.q.data() + r * cols;
    for (size_t b = 0; b < cols / ab; ++b) {
      float amax = 0;
      for (size_t i = b * ab; i < (b + 1) * ab; ++i) amax = std::max(amax, std::fabs(xr[i]));
      const float inv = amax > 0 ? 127.f / amax : 0.f;
      out.d[r * (cols / ab) + b] = amax / 127.f;
      for (size_t i = b * ab; i < (b + 1) * ab; ++i)
        q[i] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, std::nearbyint(xr[i] * inv))));
    }
    if (ab == 256)
      for (size_t g = 0; g < cols / 16; ++g) {
        int s = 0;
        for (size_t i = 16 * g; i < 16 * g + 16; ++i) s += q[i];
        out.bsum[r * (cols / 16) + g] = static_cast<int16_t>(s);
      }
  }
}

float quant_dot_ref(GgmlType t, const uint8_t* w, const QuantAct& a, size_t r) {
  if (a.ab == 32) return dot32(t, w, a.qrow(r), a.drow(r), a.cols);
  return dotk(t, w, a.qrow(r), a.drow(r), a.brow(r), a.cols);
}

}  // namespace mtp::kernels::detail
