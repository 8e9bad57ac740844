#include "core/run_budget.h"

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/memory_headroom.h"
#include "core/progress.h"
#include "core/setting.h"

namespace mtp {

namespace {
// The free space of `dir` or of its nearest existing parent (the run creates it).
double free_disk(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(dir.empty() ? fs::path(".") : fs::path(dir));
  std::error_code ec;
  while (!fs::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  const fs::space_info sp = fs::space(p, ec);
  return ec ? -1.0 : double(sp.available);
}
}  // namespace

std::string format_bytes(double b) {
  if (b < 1024) return fmt::format("{:.0f} B", b);
  if (b < 1024.0 * 1024) return fmt::format("{:.1f} KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}

std::string RunBudget::text() const {
  std::string s = what + " budget:";
  std::string sep = " ";
  auto add = [&](const std::string& part) {
    s += sep + part;
    sep = ", ";
  };
  if (sequences > 0) add(fmt::format("{} sequences", sequences));
  if (tokens > 0) add(fmt::format("{} tokens", tokens));
  if (steps > 0) add(fmt::format("{} steps", steps));
  if (disk_bytes > 0) {
    const double f = free_disk(disk_dir);
    add(fmt::format("disk {} in '{}'{}", format_bytes(disk_bytes), disk_dir,
                    f >= 0 ? fmt::format(" (free {})", format_bytes(f)) : std::string()));
  }
  if (memory_bytes > 0) {
    const MemoryHeadroom h = memory_headroom();
    // "memory 1.50 GiB beyond the 6.00 GiB held now (peak 7.50 GiB; this
    // process may take 18.5 GiB (MemAvailable))": one parenthesis.
    std::vector<std::string> notes;
    if (held_bytes > 0) notes.push_back(fmt::format("peak {}", format_bytes(held_bytes + memory_bytes)));
    if (h.known()) notes.push_back(fmt::format("this process may take {}", h.describe()));
    add(fmt::format("memory {}{}{}", format_bytes(memory_bytes),
                    held_bytes > 0 ? fmt::format(" beyond the {} held now", format_bytes(held_bytes))
                                   : std::string(),
                    notes.empty() ? std::string() : fmt::format(" ({})", fmt::join(notes, "; "))));
  }
  return s;
}

void check_budget(const RunBudget& b, bool force) {
  std::string over;
  if (b.disk_bytes > 0) {
    const double f = free_disk(b.disk_dir);
    if (f >= 0 && b.disk_bytes > f) {
      over = fmt::format("it writes {} ({:.0f} bytes) to '{}', which has {} ({:.0f} bytes) free",
                         format_bytes(b.disk_bytes), b.disk_bytes, b.disk_dir, format_bytes(f), f);
    }
  }
  if (over.empty() && b.memory_bytes > 0) {
    const MemoryHeadroom h = memory_headroom();
    if (h.known() && b.memory_bytes > h.bytes) {
      over = fmt::format("it needs {} ({:.0f} bytes) of memory and this process may take {} "
                         "({:.0f} bytes)", format_bytes(b.memory_bytes), b.memory_bytes,
                         h.describe(), h.bytes);
    }
  }
  if (over.empty()) return;
  if (force) {
    warn_setting("force", fmt::format("the {} does not fit: {}; running anyway", b.what, over));
    return;
  }
  fail_setting<InputError>("force", "the {} does not fit: {}. Free the space, use a smaller run, "
                           "or force it", b.what, over);
}

std::string estimate_line(const std::string& what, double done, double seconds, double total,
                          const std::string& unit) {
  if (done <= 0 || seconds <= 0) return what + ": no estimate (nothing measured)";
  return fmt::format("{}: estimated {} for {:.0f} {}s (from {:.0f} {}s in {:.2f} s)", what,
                     format_duration(seconds / done * total), total, unit, done, unit, seconds);
}

}  // namespace mtp
