// Diagnostic matrix backend: OpenBLAS sgemm, loaded at run time (dlopen of
// libopenblas.so.0, from Debian's libopenblas0-pthread). It is NOT
// batch-invariant — BLAS picks its blocking and reduction order by problem
// size — and exists only so `mtpspec drift --verify-kernels blas` can show what
// a non-invariant verify does to the output. Never the default.
#pragma once
#include <cstddef>
#include <string>

#include "kernels/matmul.h"

namespace mtp::kernels {

enum class Backend {
  Invariant,      // our kernels for every q (the default, invariant 1)
  BlasForBatches  // OpenBLAS sgemm whenever q > 1 (verify, prefill)
};

// Process-wide. Throws Error if BlasForBatches is asked for and OpenBLAS
// cannot be loaded.
void set_backend(Backend b);
Backend backend();

// Y[q, rows] = X[q, cols] · Wᵀ through cblas_sgemm on an fp32 copy of W (made on
// first use and cached per matrix: a diagnostic, not a fast path).
void matmul_blas(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
                 size_t y_stride);

}  // namespace mtp::kernels
