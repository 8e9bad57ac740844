#include "speculative/policy/gate.h"

#include <algorithm>

#include "core/error.h"

namespace mtp::speculative {

double CostModel::at(int q) const {
  MTP_CHECK(!verify_s.empty() && q >= 1, "cost model for q = {} with {} points", q,
            verify_s.size());
  // Monotone in q: a verify of more rows never costs less than one of fewer.
  // The per-q points are timed (and followed live) separately, so on a noisy
  // machine q = 2 can drift below q = 1; read as it was, that made a useless
  // drafter (acceptance ~0) look as cheap as plain decoding and the gate kept
  // verifying it (measured: chosen in 70 % of cycles, 0.90x plain).
  const int n = int(verify_s.size());
  double c = verify_s[0];
  for (int i = 1; i < std::min(q, n); ++i) c = std::max(c, verify_s[size_t(i)]);
  if (q <= n) return c;
  const double slope = n >= 2 ? std::max(0.0, verify_s[size_t(n - 1)] - verify_s[size_t(n - 2)])
                              : verify_s[0];
  return c + slope * (q - n);
}

SourceGate::SourceGate(int n_sources, int max_k, CostModel cost, GateOptions o)
    : max_k_(max_k), cost_(std::move(cost)), o_(o) {
  MTP_CHECK(max_k >= 1 && n_sources >= 0, "gate for {} sources, max_k {}", n_sources, max_k);
  cost_.at(1);
  cost_age_.assign(size_t(max_k) + 1, 0);
  cost_live_.assign(size_t(max_k) + 1, false);
  src_.resize(size_t(n_sources));
  for (Source& s : src_) {
    s.acc.assign(size_t(max_k), 0.0);
    s.seen.assign(size_t(max_k), 0.0);
    s.prior.assign(size_t(max_k), o_.prior_weight);
    s.draft_s.assign(size_t(max_k) + 1, -1.0);
    s.interval = o_.probe_every;
  }
}

double SourceGate::estimate(const Source& s, size_t p, double prior) const {
  const double w = s.seen[p] + s.prior[p];
  return w > 0 ? (s.acc[p] + s.prior[p] * prior) / w : 0.0;
}

// The prior of a deeper position is the estimate of the one above it, not
// prior_accept: a position the gate never verifies (a length it does not
// choose) would otherwise keep prior_accept (0.5) for good and price that
// length out — a drafter right 85 % of the time at every depth was held at 2
// of its 3 drafts. Each position's prior weight decays like an observation of
// it. Hence the walk from position 0 (here and in expected_tokens).
double SourceGate::acceptance(int source, int pos) const {
  const Source& s = src_[size_t(source)];
  const size_t last = size_t(std::min(pos, max_k_ - 1));
  double a = o_.prior_accept;
  for (size_t p = 0; p <= last; ++p) a = estimate(s, p, a);
  return a;
}

double SourceGate::expected_tokens(int source, int len) const {
  const Source& s = src_[size_t(source)];
  double e = 1, reach = 1, a = o_.prior_accept;
  for (int i = 0; i < len; ++i) {
    if (i < max_k_) a = estimate(s, size_t(i), a);  // positions past max_k - 1 reuse the last
    reach *= a;
    e += reach;
  }
  return e;
}

double SourceGate::draft_seconds(const Source& s, int len) const {
  if (len <= 0) return 0;
  if (!s.predicted.empty()) {
    const size_t n = s.predicted.size();
    return size_t(len) <= n ? s.predicted[size_t(len) - 1] : s.predicted[n - 1] * len / double(n);
  }
  if (s.draft_s[size_t(len)] >= 0) return s.draft_s[size_t(len)];
  // Never seen at this length: scale the nearest length seen (0 if none).
  for (int d = 1; d <= max_k_; ++d) {
    for (int l : {len - d, len + d}) {
      if (l >= 1 && l <= max_k_ && s.draft_s[size_t(l)] >= 0) return s.draft_s[size_t(l)] * len / l;
    }
  }
  return 0;
}

double SourceGate::cycle_seconds(int source, int len) const {
  return cost_.at(len + 1) + draft_seconds(src_[size_t(source)], len);
}

SourceGate::Choice SourceGate::choose(std::span<const int> available) {
  MTP_CHECK(available.size() == src_.size(), "gate: {} availabilities for {} sources",
            available.size(), src_.size());
  Choice best;
  const double bar = o_.enabled ? plain_value() * (1 + o_.min_gain) : 0;
  best.value = o_.enabled ? plain_value() : 0;
  Choice last;  // the best of the source last chosen on merit
  for (size_t s = 0; s < src_.size(); ++s) {
    const int a = std::min(available[s], max_k_);
    for (int len = 1; len <= a; ++len) {
      const double v = value(int(s), len);
      if (v > best.value && v > bar) best = {int(s), len, false, v};
      if (int(s) == last_merit_ && v > last.value && v > bar) last = {int(s), len, false, v};
    }
  }
  if (o_.enabled && last.source >= 0 && last.source != best.source &&
      last.value * (1 + o_.min_gain) >= best.value) {
    best = last;  // hysteresis: not switched by a fluctuation
  }
  if (!o_.enabled) return best;
  // A probe: the source idle longest past its interval, with the chain length
  // its own estimates rate best. Not always the full chain: where verify rows
  // are dear (a compute-bound target, e.g. quantized weights with m(5) ≈ 3.4),
  // a full-length probe of a losing source costs several decode steps — and
  // for the MTP drafter a catch-up of every module — while its first
  // positions decide whether it can win at all (measured: a gated drafter on
  // the Q4_K memory-bound target ran 12-15 % below plain with full probes).
  int probe = -1;
  for (size_t s = 0; s < src_.size(); ++s) {
    const Source& x = src_[s];
    if (int(s) == best.source || available[s] <= 0 || x.idle < x.interval) continue;
    if (probe < 0 || x.idle - x.interval > src_[size_t(probe)].idle - src_[size_t(probe)].interval) {
      probe = int(s);
    }
  }
  if (probe >= 0) {
    displaced_ = best.value;  // what this probe must beat to pay (observe)
    const int a = std::min(available[size_t(probe)], max_k_);
    Choice c{probe, 1, true, value(probe, 1)};
    for (int len = 2; len <= a; ++len) {
      const double v = value(probe, len);
      if (v > c.value) c.len = len, c.value = v;
    }
    return c;
  }
  // A length probe (GateOptions::length_probe_every): of the merit choice's
  // two neighbouring lengths, the one whose verify was timed live longest ago.
  if (o_.learn_costs && best.source >= 0) {
    const int a = std::min(available[size_t(best.source)], max_k_);
    int oldest = o_.length_probe_every - 1;
    for (int len : {best.len - 1, best.len + 1}) {  // q = len + 1 <= max_k + 1
      if (len >= 1 && len <= a && cost_age_[size_t(len)] > oldest) {
        oldest = cost_age_[size_t(len)];
        best.len = len;
      }
    }
    best.value = value(best.source, best.len);
  }
  displaced_ = 0;  // a merit choice pays by beating plain decoding
  return best;
}

void SourceGate::observe(int source, int len, int accepted, double cycle_s) {
  if (source < 0 || len <= 0) return;
  Source& s = src_[size_t(source)];
  if (!(cycle_s > 0)) cycle_s = cycle_seconds(source, len);
  // Paid: beat the choice the probe displaced (plain decoding, or the source
  // chosen on merit). Beating plain alone is not enough: a drafter at 1.5x
  // plain probed while a lookup ran at 2.5x paid every probe, was probed
  // every other cycle, and the union fell below that lookup alone (demo
  // target, `structured` prompts: 25 drafter probes in ~100 cycles).
  const double beat = std::max(plain_value(), displaced_);  // tokens per second
  s.paid = (accepted + 1) / cycle_s > beat * (1 + o_.min_gain);
  s.lost_s = std::max(0.0, cycle_s - (accepted + 1) / beat);
  // Positions 0..accepted were reached; the first `accepted` were accepted.
  for (int j = 0; j <= std::min(accepted, len - 1); ++j) {
    const size_t p = size_t(std::min(j, max_k_ - 1));
    s.seen[p] = s.seen[p] * o_.decay + 1;
    s.acc[p] = s.acc[p] * o_.decay + (j < accepted ? 1 : 0);
    s.prior[p] *= o_.decay;
  }
}

void SourceGate::observe_shadow(int source, int len, int matched, int known, int from) {
  if (source < 0 || from < 0 || len <= from || known <= from || matched < from) return;
  Source& s = src_[size_t(source)];
  const int acc = std::min({matched, known, len});
  const bool rejected = matched < known && matched < len;
  for (int j = from; j < acc + (rejected ? 1 : 0); ++j) {
    const size_t p = size_t(std::min(j, max_k_ - 1));
    s.seen[p] = s.seen[p] * o_.decay + 1;
    s.acc[p] = s.acc[p] * o_.decay + (j < acc ? 1 : 0);
    s.prior[p] *= o_.decay;
  }
  s.idle = 0;
}

void SourceGate::observe_verify(int q, double seconds) {
  if (!o_.learn_costs || q < 1 || seconds <= 0) return;
  while (int(cost_.verify_s.size()) < q) cost_.verify_s.push_back(cost_.at(int(cost_.verify_s.size()) + 1));
  double& c = cost_.verify_s[size_t(q - 1)];
  // The first live timing of q rows replaces a starting point above it (a
  // point timed in a noisy moment reads slow, never fast); a timing of a
  // stale point (GateOptions::cost_stale_after) moves it by stale_weight, up
  // or down; any other is just another timing.
  auto stale = [&](int rows) {
    return rows <= int(cost_live_.size()) &&
           (!cost_live_[size_t(rows - 1)] || cost_age_[size_t(rows - 1)] >= o_.cost_stale_after);
  };
  const bool tracked = q <= int(cost_live_.size());
  if (tracked && !cost_live_[size_t(q - 1)] && seconds < c) {
    c = seconds;
  } else {
    c += (stale(q) ? o_.stale_weight : o_.cost_ema) * (seconds - c);
  }
  // Fewer rows never cost more (CostModel::at): a stale point of fewer rows
  // above this one is lowered to it. Otherwise, after a slow patch, the
  // drafter's probe re-timed its own row count but a stale dear point below
  // it still priced that count (the monotone max) and the probe never paid.
  for (int r = 1; r < q; ++r)
    if (stale(r)) cost_.verify_s[size_t(r - 1)] = std::min(cost_.verify_s[size_t(r - 1)], c);
  if (q <= int(cost_age_.size())) cost_age_[size_t(q - 1)] = 0, cost_live_[size_t(q - 1)] = true;
}

void SourceGate::observe_draft(int source, int len, double seconds) {
  if (!o_.learn_costs || len < 1 || len > max_k_) return;
  double& d = src_[size_t(source)].draft_s[size_t(len)];
  d = d < 0 ? seconds : (1 - o_.cost_ema) * d + o_.cost_ema * seconds;
}

void SourceGate::set_draft_seconds(int source, std::span<const double> by_len) {
  MTP_CHECK(source >= 0 && source < n_sources(), "draft cost of source {} of {}", source, n_sources());
  src_[size_t(source)].predicted.assign(by_len.begin(), by_len.end());
}

void SourceGate::tick(const Choice& c) {
  if (c.source < 0) last_merit_ = -1;
  for (int& age : cost_age_) ++age;
  for (size_t s = 0; s < src_.size(); ++s) {
    Source& x = src_[s];
    if (int(s) != c.source) {
      ++x.idle;
      continue;
    }
    x.idle = 0;
    if (!c.probe) {
      last_merit_ = c.source;
      // Won on merit, and paid: probes at the base interval again. A merit
      // choice that did not pay leaves the interval as it was: a source at
      // break-even, chosen on merit now and then by its noisy estimates,
      // would otherwise keep its probes frequent (measured on stories260K:
      // the MTP source probed ~once per 64-token generation, each probe
      // carrying its modules' catch-up since their last run).
      if (x.paid) x.interval = o_.probe_every;
    } else {  // see gate.h: a paying probe is followed by another
      const double cap = std::max(double(o_.probe_max), x.lost_s / (o_.probe_budget * cost_.at(1)));
      x.interval = x.paid ? 1
                          : int(std::min(cap, double(std::max(o_.probe_every, x.interval * 2))));
    }
  }
}

SourceGate& GateMemory::get(int n_sources, int max_k, const CostModel& cost,
                            const GateOptions& o) {
  if (!gate || gate->n_sources() != n_sources || gate->max_k() != max_k ||
      gate->options().enabled != o.enabled) {
    CostModel c = cost;  // may be the old gate's own: copied before it goes
    gate.emplace(n_sources, max_k, std::move(c), o);
  }
  return *gate;
}

}  // namespace mtp::speculative
