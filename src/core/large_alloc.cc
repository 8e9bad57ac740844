#include "core/large_alloc.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>

#include "core/error.h"

namespace mtp {

void FreeDeleter::operator()(void* p) const { std::free(p); }

namespace detail {
bool parse_huge_pages_env(const char* v) {
  if (!v || !*v || std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  fail<InputError>("MTPSPEC_HUGE_PAGES must be 0 or 1; got '{}'", v);
}
}  // namespace detail

bool huge_pages_enabled() {
  static const bool on = detail::parse_huge_pages_env(std::getenv("MTPSPEC_HUGE_PAGES"));
  return on;
}

std::string huge_pages_description() {
  if (!huge_pages_enabled()) return "off (MTPSPEC_HUGE_PAGES=0)";
  // The active mode is the bracketed word: "always [madvise] never".
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "requested (THP state unknown)";
  const auto b = line.find('['), e = line.find(']');
  const std::string mode = b != std::string::npos && e > b ? line.substr(b + 1, e - b - 1) : line;
  if (mode == "never") return "unavailable (THP never)";
  return "on (THP " + mode + ")";
}

LargeBuffer alloc_large(size_t bytes) {
  const bool huge = bytes >= kHugePageBytes && huge_pages_enabled();
  const size_t align = huge ? kHugePageBytes : 64;
  const size_t alloc = std::max<size_t>(64, (bytes + 63) / 64 * 64);  // aligned_alloc: a multiple
  void* p = nullptr;  // posix_memalign: no size-multiple rule (aligned_alloc has one)
  if (::posix_memalign(&p, align, alloc) != 0 || !p) throw std::bad_alloc();
  // Advice before the first touch: the zeroing faults the pages in as huge
  // ones. A refusal (old kernel, THP compiled out) only costs speed.
  if (huge) (void)::madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  std::memset(p, 0, alloc);
  return LargeBuffer(static_cast<uint8_t*>(p));
}

}  // namespace mtp
