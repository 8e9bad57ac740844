#include "core/progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace mtp {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = long(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

Progress::Progress(std::string label, double total, std::string unit, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), enabled_(enabled),
      tty_(::isatty(2) == 1), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_) finish();
}

double Progress::rate() const {
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return el > 0 ? done_ / el : 0;
}

void Progress::update(double done, const std::string& extra) {
  done_ = done;
  extra_ = extra;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (std::chrono::duration<double>(now - last_draw_).count() < 0.25) return;
    last_draw_ = now;
    draw(false);
  } else {
    int decile = total_ > 0 ? int(10 * done_ / total_) : 0;
    if (decile > last_decile_) {
      last_decile_ = decile;
      draw(false);
    }
  }
}

void Progress::finish(const std::string& extra) {
  if (finished_) return;
  finished_ = true;
  if (!extra.empty()) extra_ = extra;
  if (enabled_) draw(true);
}

void Progress::draw(bool final) {
  double r = rate();
  double pct = total_ > 0 ? 100.0 * done_ / total_ : 0;
  std::string eta = final ? "done in " + format_duration(done_ / (r > 0 ? r : 1))
                          : "ETA " + format_duration(r > 0 ? (total_ - done_) / r : NAN);
  std::string made;
  if (produced_ >= 0) {
    const double el =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    made = fmt::format("{:.0f} {} made, {:.1f} {}/s", produced_, unit_,
                       el > 0 ? produced_ / el : 0.0, unit_);
  } else {
    made = fmt::format("{:.1f} {}/s", r, unit_);
  }
  std::string line = fmt::format("[{}] {:5.1f}% {:.0f}/{:.0f} {}{} | {} | {}{}{}", label_, pct,
                                 done_, total_, unit_, produced_ >= 0 ? " planned" : "", made, eta,
                                 extra_.empty() ? "" : " | ", extra_);
  if (tty_) {
    note("\r\033[K{}{}", line, final ? "\n" : "");
  } else {
    note("{}\n", line);
  }
}

}  // namespace mtp
