#include "measure/bench_math.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace mtp::speculative {

double expected_tokens_per_cycle(const std::vector<double>& a) {
  double e = 1, run = 1;
  for (double p : a) {
    run *= p;
    e += run;
  }
  return e;
}

double predicted_speedup(double e, double m, double c) { return e / (m + c); }

std::optional<double> break_even_acceptance(int k, double m, double c) {
  const double cost = m + c;
  auto tokens = [k](double p) { return expected_tokens_per_cycle(std::vector<double>(k, p)); };
  if (tokens(1.0) < cost) return std::nullopt;  // even perfect drafts cannot pay
  if (tokens(0.0) >= cost) return 0.0;          // a free cycle: anything breaks even
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {  // tokens(p) is increasing in p
    double mid = 0.5 * (lo + hi);
    (tokens(mid) < cost ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Spread spread(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  s.stdev = v.size() > 1 ? std::sqrt(var / double(v.size() - 1)) : 0.0;
  return s;
}

CycleCost cycle_cost(long cycles, double draft_s, double verify_s, double other_s,
                     double decode_step_s) {
  CycleCost c;
  if (cycles <= 0 || decode_step_s <= 0) return c;
  const double unit = double(cycles) * decode_step_s;
  c.draft_rel = draft_s / unit;
  c.verify_rel = verify_s / unit;
  c.other_rel = other_s / unit;
  c.cycle_rel_decode = c.draft_rel + c.verify_rel + c.other_rel;
  c.other_fraction = c.cycle_rel_decode > 0 ? c.other_rel / c.cycle_rel_decode : 0;
  return c;
}

double distinct_n(const std::vector<std::vector<int32_t>>& seqs, int n) {
  if (n < 1) fail<InputError>("distinct-n needs n >= 1, got {}", n);
  double sum = 0;
  int counted = 0;
  for (const auto& s : seqs) {
    if (s.size() < size_t(n)) continue;
    std::set<std::vector<int32_t>> seen;
    const size_t total = s.size() - size_t(n) + 1;
    for (size_t i = 0; i < total; ++i) seen.emplace(s.begin() + i, s.begin() + i + n);
    sum += double(seen.size()) / double(total);
    ++counted;
  }
  return counted ? sum / counted : 0.0;
}

}  // namespace mtp::speculative
