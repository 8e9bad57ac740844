// What the built-in draft sources' files share (internal to sources/): the
// registration every built-in kind calls once (draft_source.cc keeps the
// registry and calls each kind's register_*_source on first use), and the
// clock their propose() calls time themselves with (ProposeJob::seconds).
#pragma once
#include <chrono>
#include <string>
#include <string_view>

#include "speculative/sources/draft_source.h"

namespace mtp::speculative {

void register_builtin_source(std::string_view name, SourceFactory make, std::string help);

namespace sources_detail {
using Clock = std::chrono::steady_clock;
// Seconds from t to now.
inline double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace sources_detail

}  // namespace mtp::speculative
