// The quantized products' entry point and their VNNI switches. Every ggml
// block type is held by groups of 16 output rows (grouped_blocks.h) and runs
// in matmul_grouped.cc, under the arithmetic contract of quant_dot.h.
#include <atomic>
#include <string_view>

#include "core/error.h"
#include "kernels/grouped_blocks.h"
#include "kernels/matmul.h"
#include "kernels/packed_access.h"
#include "kernels/quant_dot.h"

namespace mtp::kernels {

namespace detail {
namespace {
std::atomic<bool> g_vnni_allowed{true};
}  // namespace

bool cpu_has_quant_vnni(std::string_view target) {
  static const bool avx512 = __builtin_cpu_supports("avx512vnni");
  static const bool avx = __builtin_cpu_supports("avxvnni");
  if (target.starts_with("AVX3")) return avx512;
  if (target == "AVX2") return avx;
  return false;
}
bool quant_vnni_allowed() { return g_vnni_allowed.load(std::memory_order_relaxed); }
void set_quant_vnni(bool allowed) { g_vnni_allowed.store(allowed, std::memory_order_relaxed); }

void matmul_quant(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
                  size_t y_stride, ThreadPool* pool) {
  const GgmlType t = weight_ggml_type(w.hold());
  MTP_CHECK(held_grouped(t), "matmul_quant: {} is not held grouped", weight_type_name(w.hold()));
  matmul_grouped(w, x, x_stride, q, y, y_stride, pool);
}
}  // namespace detail
}  // namespace mtp::kernels
