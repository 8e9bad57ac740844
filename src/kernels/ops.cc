#include "kernels/ops.h"

#include <cmath>
#include <limits>

namespace mtp::kernels {

void rmsnorm(const float* x, const float* w, size_t n, float eps, float* out) {
  float ss = 0.f;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  float inv = 1.0f / std::sqrt(ss / float(n) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
}

void rope(float* x, const float* cos, const float* sin, size_t head_dim, bool interleaved) {
  size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    size_t a = interleaved ? 2 * i : i;
    size_t b = interleaved ? 2 * i + 1 : i + half;
    float x0 = x[a], x1 = x[b];
    x[a] = x0 * cos[i] - x1 * sin[i];
    x[b] = x0 * sin[i] + x1 * cos[i];
  }
}

void softmax(float* x, size_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) m = std::fmax(m, x[i]);
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  float inv = 1.0f / s;
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

void softcap(float* y, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) y[i] = cap * std::tanh(y[i] / cap);
}

void attend(const float* q, const float* k, const float* v, size_t stride, size_t n_slots,
            size_t lo, size_t hi, size_t head_dim, float scale, float cap, float* scores,
            float* out) {
  size_t n = hi - lo + 1;
  for (size_t j = 0; j < n; ++j) {
    const float* kj = k + ((lo + j) % n_slots) * stride;
    float s = 0.f;
    for (size_t d = 0; d < head_dim; ++d) s += q[d] * kj[d];
    s *= scale;
    if (cap > 0.f) s = cap * std::tanh(s / cap);
    scores[j] = s;
  }
  softmax(scores, n);
  for (size_t d = 0; d < head_dim; ++d) out[d] = 0.f;
  for (size_t j = 0; j < n; ++j) {
    const float* vj = v + ((lo + j) % n_slots) * stride;
    float p = scores[j];
    for (size_t d = 0; d < head_dim; ++d) out[d] += p * vj[d];
  }
}

void silu_mul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out) {
  const float c = 0.7978845608028654f;  // sqrt(2/pi)
  for (size_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(c * (g + 0.044715f * g * g * g))) * up[i];
  }
}

size_t argmax(const float* x, size_t n) {
  size_t best = 0;
  float bv = -std::numeric_limits<float>::infinity();
  bool found = false;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (!found || x[i] > bv) {
      bv = x[i];
      best = i;
      found = true;
    }
  }
  return best;
}

}  // namespace mtp::kernels
