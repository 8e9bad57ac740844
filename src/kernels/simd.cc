// SIMD target selection (simd.h): MTPSPEC_SIMD and set_simd_target() narrow
// Highway's set of supported targets, and every dispatch table follows.
//
// Mechanism (Highway 1.0.x, hwy/targets.h): SetSupportedTargetsForTest(mask)
// makes SupportedTargets() return `mask` instead of what the CPU detects, and
// ChosenTarget::Update(SupportedTargets()) re-points HWY_DYNAMIC_DISPATCH of
// every HWY_EXPORT table to the best target in that mask (the HWY_SCALAR /
// HWY_EMU128 bit maps to the tables' last, fallback entry). The mock replaces
// detection, so we only ever pass targets the CPU was detected to run: the
// host's set is read once, before any mock is installed.
//
// Compiled once per target (foreach_target) for the two probes below only.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

// Whether hn::MulAdd is one fused operation on this target.
bool HasFma() {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || \
    HWY_TARGET == HWY_SCALAR
  return false;
#else
  return true;
#endif
}

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <hwy/targets.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "kernels/quant_dot.h"
#include "kernels/simd.h"

namespace mtp::kernels {
HWY_EXPORT(TargetName);
HWY_EXPORT(HasFma);

namespace detail {
std::atomic<bool> g_simd_chosen{false};
}  // namespace detail

namespace {

struct Target {
  const char* name;
  int64_t mask;  // Highway target bits; the best one available is used
};

// Best first. All kernels are compiled with the same flags, so this TU's
// HWY_TARGETS is the set every table holds.
constexpr Target kTargets[] = {
    {"avx3", HWY_AVX3_DL | HWY_AVX3},
    {"avx2", HWY_AVX2},
    {"sse4", HWY_SSE4},
    {"scalar", HWY_EMU128 | HWY_SCALAR},  // g++ builds of Highway 1.0: HWY_SCALAR
};

std::mutex g_mu;           // guards the mock and g_request
std::string g_request;     // pinned name, "" = automatic

// Targets the CPU executes (detection, not the mock), computed before the
// first mock is installed: SupportedTargets() ignores the CPU while mocked.
int64_t host_targets() {
  static const int64_t host = [] {
    hwy::SetSupportedTargetsForTest(0);
    return hwy::SupportedTargets();
  }();
  return host;
}

int64_t runnable(const Target& t) { return t.mask & host_targets() & HWY_TARGETS; }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// `what` names the source of the request in errors ("MTPSPEC_SIMD", ...).
// Caller holds g_mu.
void select_locked(const std::string& name, const char* what) {
  if (name.empty()) {
    host_targets();  // before clearing any mock: the first call detects
    hwy::SetSupportedTargetsForTest(0);
  } else {
    const Target* t = nullptr;
    for (const auto& c : kTargets)
      if (name == c.name) t = &c;
    if (!t)
      fail<InputError>("{}: unknown SIMD target '{}' (allowed: {})", what, name,
                       join(simd_target_names()));
    const int64_t bits = runnable(*t);
    if (bits == 0)
      fail<ConfigError>("{}: this CPU (or build) cannot run SIMD target '{}' (available here: {})",
                        what, name, join(available_simd_targets()));
    hwy::SetSupportedTargetsForTest(bits);
  }
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  g_request = name;
  detail::g_simd_chosen.store(true, std::memory_order_release);
}

}  // namespace

int64_t detail::host_simd_targets() { return host_targets(); }

const std::vector<std::string>& simd_target_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& t : kTargets) v.push_back(t.name);
    return v;
  }();
  return names;
}

std::vector<std::string> available_simd_targets() {
  std::vector<std::string> v;
  for (const auto& t : kTargets)
    if (runnable(t)) v.push_back(t.name);
  return v;
}

void set_simd_target(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  select_locked(name, "set_simd_target");
}

std::string simd_target_request() {
  detail::ensure_simd_target();
  std::lock_guard<std::mutex> lock(g_mu);
  return g_request;
}

const char* simd_target() {
  detail::ensure_simd_target();
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

bool simd_target_has_fma() {
  detail::ensure_simd_target();
  return HWY_DYNAMIC_DISPATCH(HasFma)();
}

bool simd_quant_vnni() {  // per quantized product: no string building
  return detail::quant_vnni_allowed() && detail::cpu_has_quant_vnni(simd_target());
}

std::string simd_target_description() {
  const std::string req = simd_target_request();
  const std::string name = simd_target();
  const char* vnni = !simd_quant_vnni() ? "" : name == "AVX2" ? " + AVX-VNNI" : " + VNNI";
  return name + vnni +
         (req.empty() ? " (automatic)" : " (MTPSPEC_SIMD=" + req + ")");
}

namespace detail {
void apply_simd_env() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_simd_chosen.load(std::memory_order_acquire)) return;  // another thread did
  const char* env = std::getenv("MTPSPEC_SIMD");
  select_locked(env ? env : "", "MTPSPEC_SIMD");
}
}  // namespace detail

}  // namespace mtp::kernels
#endif  // HWY_ONCE
