#include "kernels/matmul_blas.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/setting.h"

namespace mtp::kernels {

namespace {

// cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                         int, float, float*, int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

std::atomic<Backend> g_backend{Backend::Invariant};

SgemmFn load_sgemm() {
  static SgemmFn fn = [] {
    for (const char* lib : {"libopenblas.so.0", "libopenblas.so", "libblas.so.3"}) {
      if (void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) {
        if (void* s = dlsym(h, "cblas_sgemm")) return reinterpret_cast<SgemmFn>(s);
      }
    }
    return SgemmFn(nullptr);
  }();
  if (!fn) {
    fail_setting<Error>("verify_kernels",
                        "the BLAS kernels need OpenBLAS (libopenblas.so.0: apt-get install "
                        "libopenblas0-pthread)");
  }
  return fn;
}

const std::vector<float>& fp32_copy(const PackedMatrix& w) {
  static std::mutex mu;
  static std::unordered_map<const uint8_t*, std::vector<float>> cache;
  std::lock_guard<std::mutex> lk(mu);
  auto& v = cache[w.data()];
  if (v.empty()) {
    v.resize(w.rows() * w.cols());
    for (size_t r = 0; r < w.rows(); ++r) w.row_f32(r, v.data() + r * w.cols());
  }
  return v;
}

}  // namespace

void set_backend(Backend b) {
  if (b == Backend::BlasForBatches) load_sgemm();
  g_backend = b;
}

Backend backend() { return g_backend.load(std::memory_order_relaxed); }

void matmul_blas(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
                 size_t y_stride) {
  const std::vector<float>& W = fp32_copy(w);
  load_sgemm()(kRowMajor, kNoTrans, kTrans, int(q), int(w.rows()), int(w.cols()), 1.0f, x,
               int(x_stride), W.data(), int(w.cols()), 0.0f, y, int(y_stride));
}

}  // namespace mtp::kernels
