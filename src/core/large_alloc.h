// Large, long-lived buffers (packed weights, bandwidth probes) backed by
// transparent huge pages where the kernel allows them.
//
// Why: a decode streams every weight byte once per token (1.85 GB on the ~1 B
// target). On 4 KiB pages that is one TLB miss per 4 KiB and the hardware
// prefetchers stop at every page boundary; most distributions ship THP in
// "madvise" mode, so memory is only backed by 2 MiB pages when asked. Measured
// on a 2-core EPYC (docs/lab/performance-history.md "Huge pages and prefetch
// into L2"): a bf16 4096x4096 product at q = 1 streams 22.6 GB/s on huge
// pages against 15.2 on 4 KiB ones.
//
// Contract: alloc_large(n) returns n bytes, 64-byte aligned, zeroed, or throws
// std::bad_alloc. Buffers of at least kHugePageBytes are 2 MiB aligned and
// advised MADV_HUGEPAGE before first touch (the tail past the last 2 MiB
// boundary stays on small pages: no rounding, no wasted memory). The advice
// changes where bytes live, never their values. MTPSPEC_HUGE_PAGES=0 turns
// the advice off (for before/after measurements and for hosts where
// compaction stalls matter more than bandwidth); any other value than 0/1 is
// refused by huge_pages_enabled() with an InputError naming it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mtp {

constexpr size_t kHugePageBytes = size_t(2) << 20;  // x86-64 PMD huge page

struct FreeDeleter {
  void operator()(void* p) const;
};
using LargeBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;

// Whether buffers >= kHugePageBytes are advised onto huge pages
// (MTPSPEC_HUGE_PAGES, default 1; read once).
bool huge_pages_enabled();
// What this process gets, for benchmark output: "on (THP madvise)",
// "off (MTPSPEC_HUGE_PAGES=0)", "unavailable (THP never)", ...
std::string huge_pages_description();

LargeBuffer alloc_large(size_t bytes);

namespace detail {
// The MTPSPEC_HUGE_PAGES rule: unset, "" or "1" -> true, "0" -> false, else
// InputError naming the value.
bool parse_huge_pages_env(const char* value);
}  // namespace detail

}  // namespace mtp
