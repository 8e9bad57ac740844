#include "speculative/policy/draft_budget.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/error.h"

namespace mtp::speculative {

CostCurve::CostCurve(std::vector<std::pair<int, double>> points)
    : pts_(std::move(points)), raw_(pts_) {
  MTP_CHECK(!pts_.empty(), "a cost curve needs at least one point");
  for (size_t i = 1; i < pts_.size(); ++i) {
    MTP_CHECK(pts_[i].first > pts_[i - 1].first, "cost curve q values must ascend");
  }
}

double CostCurve::ratio(int q) const {
  if (live_.empty()) return 1.0;
  if (q <= live_.front().first) return live_.front().second;
  if (q >= live_.back().first) return live_.back().second;
  size_t i = 1;
  while (live_[i].first < q) ++i;
  const auto [q0, r0] = live_[i - 1];
  const auto [q1, r1] = live_[i];
  return r0 + (r1 - r0) * double(q - q0) / double(q1 - q0);
}

double CostCurve::operator()(int q) const {
  if (q <= 0) return 0;
  double v = timed(q) * ratio(q);
  // Never decreasing: at least the value at every observed q below.
  for (const auto& [lq, r] : live_) {
    if (lq >= q) break;
    v = std::max(v, timed(lq) * r);
  }
  return v;
}

void CostCurve::observe(int q, double seconds) {
  const double t = timed(q);
  if (q < 1 || !(seconds > 0) || !(t > 0)) return;
  const double r = seconds / t;
  auto it = std::lower_bound(live_.begin(), live_.end(), q,
                             [](const auto& p, int x) { return p.first < x; });
  if (it != live_.end() && it->first == q) {
    it->second = (1 - kLive) * it->second + kLive * r;
  } else {
    live_.insert(it, {q, r});
  }
}

double CostCurve::timed(int q) const {
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

void CostCurve::rebuild() {
  pts_ = raw_;
  for (size_t i = 1; i < pts_.size(); ++i) pts_[i].second = std::max(pts_[i].second, pts_[i - 1].second);
}

void CostCurve::add_point(int q, double seconds) {
  auto it = std::lower_bound(raw_.begin(), raw_.end(), q,
                             [](const auto& p, int x) { return p.first < x; });
  if (it != raw_.end() && it->first == q) it->second = seconds;
  else raw_.insert(it, {q, seconds});
  rebuild();
}

void CostCurve::lower_point(int q, double seconds) {
  auto it = std::find_if(raw_.begin(), raw_.end(), [&](const auto& p) { return p.first == q; });
  MTP_CHECK(it != raw_.end(), "lower_point({}): no timed point there", q);
  it->second = std::min(it->second, seconds);
  rebuild();
}

bool CostCurve::has_point(int q) const {
  return std::any_of(pts_.begin(), pts_.end(), [&](const auto& p) { return p.first == q; });
}

ForwardTimer::ForwardTimer(const model::Model& m, int q_max, ThreadPool* pool)
    : m_(m), pool_(pool),
      q_max_(std::max(1, std::min(q_max, m.config().max_position - kPos - 1))),
      kv_(m.make_cache(1, kPos + q_max_ + 1, std::max(64, q_max_))),
      logits_(size_t(q_max_) * size_t(m.config().vocab)) {
  std::vector<model::Row> rows;
  for (int p = 0; p < kPos; ++p) rows.push_back({0, p, int32_t(rng_() % uint32_t(m.config().vocab))});
  m_.forward(rows, kv_, {}, pool_);
}

double ForwardTimer::seconds(int q) {
  MTP_CHECK(q >= 1 && q <= q_max_, "ForwardTimer: q {} outside 1..{}", q, q_max_);
  std::vector<model::Row> rows;
  for (int j = 0; j < q; ++j) rows.push_back({0, kPos + j, int32_t(rng_() % uint32_t(m_.config().vocab))});
  const auto t0 = std::chrono::steady_clock::now();
  m_.forward(rows, kv_, {logits_.data(), nullptr, nullptr}, pool_);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kv_.truncate(0, kPos);
  return sec;
}

CostCurve forward_cost_curve(const model::Model& m, int q_max, int reps, ThreadPool* pool,
                             double stop_m) {
  ForwardTimer timer(m, q_max, pool);
  return forward_cost_curve(timer, q_max, reps, stop_m);
}

CostCurve forward_cost_curve(ForwardTimer& timer, int q_max, int reps, double stop_m) {
  q_max = std::max(1, std::min(q_max, timer.q_max()));
  // A few q: every forward of a big model costs, and m(q) is smooth between.
  std::vector<int> qs;
  for (int q : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
    if (q <= q_max) qs.push_back(q);
  }
  // q_max itself only when the last slope would extrapolate far (33 after 32
  // would cost a forward and tell nothing new).
  if (qs.back() != q_max && q_max > qs.back() + qs.back() / 4) qs.push_back(q_max);
  std::vector<std::vector<double>> t(qs.size());
  double decode_s = 0;  // the first round's q = 1 forwards, the faster
  // Interleaved q by q; the timer's prefill paged the weights in, so the first
  // round counts (q = 1, the unit of every ratio, timed twice in it).
  for (int r = 0; r <= std::max(0, reps); ++r) {
    for (size_t i = 0; i < qs.size(); ++i) {
      const double sec = r == 0 && i == 0 ? std::min(timer.seconds(1), timer.seconds(1))
                                          : timer.seconds(qs[i]);
      t[i].push_back(sec);
      if (r == 0 && i == 0) decode_s = sec;
      if (r == 0 && i > 0 && stop_m > 0 && sec >= stop_m * decode_s) {
        qs.resize(i + 1);  // the larger q are not timed (the curve extends its slope)
        t.resize(i + 1);
        break;
      }
    }
  }
  std::vector<std::pair<int, double>> pts;
  // The fastest of the rounds: on a shared machine other work only adds time
  // (a median still keeps one preempted call of three). Non-decreasing: a
  // q-row forward never costs less than a fewer-row one.
  double best = 0;
  for (size_t i = 0; i < qs.size(); ++i) {
    best = std::max(best, *std::min_element(t[i].begin(), t[i].end()));
    pts.push_back({qs[i], best});
  }
  return CostCurve(std::move(pts));
}

void AcceptCounters::step() {
  for (double& x : drafted_) x *= kForget;
  for (double& x : accepted_) x *= kForget;
  if (decay_prior_) prior_weight_ *= kForget;
}

void AcceptCounters::add(int reached, int accepted, int from) {
  for (int d = std::max(0, from); d < std::min(reached, int(drafted_.size())); ++d) {
    drafted_[size_t(d)] += 1;
    if (d < accepted) accepted_[size_t(d)] += 1;
  }
}

std::vector<double> estimate_accept(std::span<const double> drafted,
                                    std::span<const double> accepted, int k_max, double prior,
                                    double weight) {
  const double kWeight = weight;
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

double first_draft_seconds(double module_row_s, int modules, int gap, double tokens_per_cycle) {
  const double tokens = std::min(double(std::max(0, gap)), std::max(1.0, tokens_per_cycle));
  return tokens * double(std::max(0, modules)) * module_row_s;
}

double chain_net_value(const CostCurve& m, int rows, double rate, std::span<const double> p,
                       double first_s, double per_draft_s) {
  double best = 0, gain = 0;
  for (size_t k = 1; k <= p.size(); ++k) {
    gain += p[k - 1];
    const double cost = m(rows + int(k)) - m(rows) + first_s + double(k) * per_draft_s;
    best = std::max(best, gain - rate * cost);
  }
  return best;
}

namespace {
struct Allocation {
  std::vector<int> k;
  double tokens = 0, seconds = 0;
};

// Greedy drafts of at most `cap` per sequence (free ones: their p.size()), the
// calls of depths < cap counted up front; seconds: with the calls of the depths
// in use only.
Allocation allocate_capped(const CostCurve& m, const ModuleCost& module, int base_rows,
                           int decode_rows, int max_rows, std::span<const BudgetSeq> seqs,
                           int cap) {
  Allocation a;
  a.k.assign(seqs.size(), 0);
  int rows = base_rows;
  double extra = 0;  // seconds added: the drafts' rows (on the curve) and drafter time
  a.tokens = decode_rows;
  const double calls = double(cap) * module.call_s;
  while (rows < max_rows) {
    // The next draft with the most expected tokens per second of extra cost
    // (ties: the lower index); every candidate adds one row.
    const double drow = m(rows + 1) - m(rows);
    int best = -1;
    double best_gain = 0, best_cost = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int j = a.k[s];
      const bool free = seqs[s].free;
      if ((!free && j >= cap) || size_t(j) >= seqs[s].p.size()) continue;
      const double g = seqs[s].p[size_t(j)];
      const double c =
          free ? drow : drow + (j == 0 ? seqs[s].first_s + module.row_s : j * module.row_s);
      if (best < 0 || g * best_cost > best_gain * c) best = int(s), best_gain = g, best_cost = c;
    }
    if (best < 0) break;
    // Worth it when it raises tokens per second: (T + g) / (C + dc) > T / C,
    // T / C the decode rows' own rate (prefill rows are work done anyway).
    const double cost = m(decode_rows) + extra + calls;
    if (!(cost > 0) || best_gain * cost <= a.tokens * best_cost) break;
    ++a.k[size_t(best)];
    ++rows;
    a.tokens += best_gain;
    extra += best_cost;
  }
  int used = 0;  // module depths in use
  for (size_t s = 0; s < seqs.size(); ++s) {
    if (!seqs[s].free) used = std::max(used, a.k[s]);
  }
  a.seconds = m(decode_rows) + extra + double(used) * module.call_s;
  return a;
}
}  // namespace

std::vector<int> allocate_drafts(const CostCurve& m, const ModuleCost& module, int base_rows,
                                 int decode_rows, int max_rows, std::span<const BudgetSeq> seqs) {
  size_t depth = 0;  // the deepest module call any sequence could use
  for (const BudgetSeq& s : seqs) {
    if (!s.free) depth = std::max(depth, s.p.size());
  }
  Allocation best = allocate_capped(m, module, base_rows, decode_rows, max_rows, seqs, 0);
  if (decode_rows < 1) return best.k;
  for (int cap = 1; cap <= int(depth); ++cap) {
    Allocation a = allocate_capped(m, module, base_rows, decode_rows, max_rows, seqs, cap);
    // A deeper cap only when it is strictly faster (tokens per second).
    if (a.seconds > 0 && a.tokens * best.seconds > best.tokens * a.seconds * (1 + 1e-12)) {
      best = std::move(a);
    }
  }
  return best.k;
}

}  // namespace mtp::speculative
