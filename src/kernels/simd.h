// Which SIMD target the kernels (matmul.h, ops.h) run on.
//
// By default Highway's runtime dispatch picks the best target the CPU executes.
// The environment variable MTPSPEC_SIMD=avx3|avx2|sse4|scalar pins one (read
// once, at the first kernel call of the process); set_simd_target() does the
// same from code (tests loop over available_simd_targets()).
//
// Names (best first) and the Highway targets they select:
//   avx3   - AVX-512 (HWY_AVX3_DL or HWY_AVX3, whichever is best here)
//   avx2   - HWY_AVX2 (8-lane vectors, FMA)
//   sse4   - HWY_SSE4 (4 lanes, no FMA)
//   scalar - Highway's portable C++ target, no intrinsics, no FMA: HWY_SCALAR
//            (one lane; what Debian's g++ build of Highway 1.0 compiles) or
//            HWY_EMU128 where that is compiled instead
// Bits (see matmul.cc's reduction-order contract): avx3 and avx2 give identical
// matmul results, and so do sse4 and scalar; the two pairs differ from each
// other (fused vs separately rounded multiply-add), and every target is
// batch-invariant on its own.
//
// Not thread-safe against concurrent kernel calls: switch targets only while
// no kernel runs (at start-up, or between test cases).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace mtp::kernels {

// Every name set_simd_target() knows, best first.
const std::vector<std::string>& simd_target_names();

// The names of simd_target_names() this CPU executes and this build compiled,
// best first. Never empty ("scalar" always runs).
std::vector<std::string> available_simd_targets();

// Pins every kernel to the target `name` (one of simd_target_names()); "" goes
// back to automatic dispatch (the best available). Throws InputError for an
// unknown name (naming it and the allowed set) and ConfigError for a target
// the host cannot run (naming what it can). Overrides MTPSPEC_SIMD.
void set_simd_target(const std::string& name);

// The name pinned by MTPSPEC_SIMD or set_simd_target(); "" when automatic.
std::string simd_target_request();

// Name of the Highway target the kernels dispatch to now (e.g. "AVX3", "AVX2",
// "SSE4", "SCALAR"); applies MTPSPEC_SIMD first.
const char* simd_target();

// Whether the current target's multiply-add is fused (one rounding): true on
// avx3 and avx2, false on sse4 and scalar (product rounded, then the sum).
bool simd_target_has_fma();

// Whether the quantized kernels (matmul_grouped.cc) run their VNNI
// instantiations now: on the avx3 target of a CPU with AVX512_VNNI, or on the
// avx2 target of one with AVX-VNNI (Intel Alder Lake and later) — the same
// bits either way; reports say which ran ("+ VNNI", "+ AVX-VNNI").
bool simd_quant_vnni();

// simd_target() and how it was chosen, for reports: "AVX2 (MTPSPEC_SIMD=avx2)",
// "AVX3 (automatic)".
std::string simd_target_description();

namespace detail {
// Highway target bits this CPU executes (detection: whatever is pinned).
int64_t host_simd_targets();
extern std::atomic<bool> g_simd_chosen;  // MTPSPEC_SIMD applied or target set
void apply_simd_env();
// Applies MTPSPEC_SIMD if that has not happened yet; throws as set_simd_target
// (and again at the next call: a bad value never falls back silently). Every
// kernel entry point calls this before it dispatches.
inline void ensure_simd_target() {
  if (!g_simd_chosen.load(std::memory_order_acquire)) apply_simd_env();
}
}  // namespace detail

}  // namespace mtp::kernels
