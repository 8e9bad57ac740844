// Scalar reference versions of the row-wise operations in ops.h: the plain
// sequential fp32 loops the SIMD versions replace. Same contracts as ops.h;
// bits may differ (reduction order, exp/tanh polynomials), so tests compare
// them with tolerances. Not used on the hot path.
#pragma once
#include <cstddef>

namespace mtp::kernels::ref {

void rmsnorm(const float* x, const float* w, size_t n, float eps, float* out);
void softmax(float* x, size_t n);
void softcap(float* y, size_t n, float cap);
void attend(const float* q, const float* k, const float* v, size_t stride, size_t n_slots,
            size_t lo, size_t hi, size_t head_dim, float scale, float cap, float* scores,
            float* out);
void silu_mul(const float* gate, const float* up, size_t n, float* out);
void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out);

}  // namespace mtp::kernels::ref
