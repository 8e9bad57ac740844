#include "speculative/draft_budget.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "speculative/forward_timing.h"

namespace mtp::speculative {

CostCurve::CostCurve(std::vector<std::pair<int, double>> points) : pts_(std::move(points)) {
  MTP_CHECK(!pts_.empty(), "a cost curve needs at least one point");
  for (size_t i = 1; i < pts_.size(); ++i) {
    MTP_CHECK(pts_[i].first > pts_[i - 1].first, "cost curve q values must ascend");
  }
}

double CostCurve::operator()(int q) const {
  if (pts_.empty() || q <= 0) return 0;
  if (pts_.size() == 1) return pts_[0].second * q / pts_[0].first;
  size_t i = 1;
  while (i + 1 < pts_.size() && pts_[i].first < q) ++i;
  // Segment [i-1, i]; beyond the ends the nearest segment's slope.
  const auto [q0, t0] = pts_[i - 1];
  const auto [q1, t1] = pts_[i];
  const double t = t0 + (t1 - t0) * double(q - q0) / double(q1 - q0);
  return std::max(t, 0.0);
}

CostCurve forward_cost_curve(const model::Model& m, int q_max, int reps, ThreadPool* pool) {
  q_max = std::max(1, std::min(q_max, m.config().max_position - 17));
  const std::vector<double> t = forward_times(m, 16, q_max, reps, pool);
  std::vector<std::pair<int, double>> pts;
  // Medians of a noisy machine: keep the curve non-decreasing (a q-row
  // forward never costs less than a (q-1)-row one).
  double best = 0;
  for (size_t q = 0; q < t.size(); ++q) {
    best = std::max(best, t[q]);
    pts.push_back({int(q) + 1, best});
  }
  return CostCurve(std::move(pts));
}

std::vector<double> estimate_accept(std::span<const long> drafted, std::span<const long> accepted,
                                    int k_max, double prior) {
  constexpr double kWeight = 2.0;
  std::vector<double> p(size_t(std::max(0, k_max)));
  double pj = prior, prev = 1.0;
  for (size_t j = 0; j < p.size(); ++j) {
    const double n = j < drafted.size() ? double(drafted[j]) : 0.0;
    const double a = j < accepted.size() ? double(accepted[j]) : 0.0;
    // accepted[j] / drafted[j]: of the cycles that drafted depth j + 1, the
    // share whose accepted path reached it — P(drafts 0..j all accepted).
    p[j] = std::min(prev, (a + kWeight * pj) / (n + kWeight));
    prev = p[j];
    pj *= prior;
  }
  return p;
}

std::vector<int> allocate_drafts(const CostCurve& m, double module_s, int base_rows,
                                 double base_tokens, int max_rows,
                                 std::span<const BudgetSeq> seqs) {
  std::vector<int> k(seqs.size(), 0);
  int rows = base_rows;
  double tokens = base_tokens, cost = m(rows);
  while (rows < max_rows) {
    // The next draft with the most expected tokens per second of extra cost
    // (ties: the lower index); every candidate adds one row.
    const double drow = m(rows + 1) - m(rows);
    int best = -1;
    double best_gain = 0, best_cost = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (size_t(k[s]) >= seqs[s].p.size()) continue;
      const double g = seqs[s].p[size_t(k[s])];
      const double c = drow + (k[s] >= 1 ? module_s : seqs[s].first_s);
      if (best < 0 || g * best_cost > best_gain * c) best = int(s), best_gain = g, best_cost = c;
    }
    if (best < 0) break;
    // Worth it when it raises tokens per second: (T + g) / (C + dc) > T / C.
    if (!(cost > 0) || best_gain * cost <= tokens * best_cost) break;
    ++k[size_t(best)];
    ++rows;
    tokens += best_gain;
    cost += best_cost;
  }
  return k;
}

}  // namespace mtp::speculative
