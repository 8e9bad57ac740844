#include "speculative/cycle/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/setting.h"
#include "kernels/ops.h"

namespace mtp::speculative {

namespace {
// splitmix64's finaliser: a bijective 64-bit mix with full avalanche.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// keyed_uniform's hash with the (seed, pos, stream) part shared by a row's
// candidates computed once: two mixes per token id instead of four.
class RowNoise {
 public:
  RowNoise(uint64_t seed, int64_t pos, NoiseStream s)
      : h_(mix(mix(seed) ^ uint64_t(pos))), stream_(uint64_t(s)) {}
  double uniform(int64_t token) const {
    const uint64_t h = mix(mix(h_ ^ uint64_t(token)) ^ stream_);
    return (double(h >> 11) + 0.5) * 0x1p-53;  // (0, 1): never 0 or 1
  }
  static double gumbel(double u) { return -std::log(-std::log(u)); }

 private:
  uint64_t h_, stream_;
};

// Skipping candidates that cannot reach a score. A kept candidate's score is
// s = logp + g with g = −log(−log u), and −log u ≥ 1 − u, so s ≤ logp −
// log(1 − u) = log(ex / (1 − u)) − log_sum (ex = its unnormalised
// probability, exp(logp + log_sum)). So s cannot reach `floor` when
// ex < (1 − u)·exp(floor + log_sum); kMargin (in log space, far above the
// 1e-14 rounding of these doubles) keeps the test conservative. The test costs
// one multiply instead of two logs: nearly every candidate of a real row fails
// it, so only a handful are scored exactly — the same scores, the same winner.
constexpr double kMargin = 1e-6;
double skip_bar(double floor, double log_sum, bool off) {
  return off ? 0.0 : std::exp(floor - kMargin + log_sum);  // 0: nothing is skipped
}

// The keyed Gumbel-max over candidates 0..n-1: argmax of logp(i) + g(id(i)),
// ties to the lower i, over those with ex(i) > 0 (ex = exp(logp + log_sum),
// the unnormalised probability, monotone in logp). The most probable is scored
// first, the others only where skip_bar lets them reach the best so far, so
// logp is evaluated for a handful. n when no candidate has ex > 0.
template <class LogP, class Ex, class Id>
size_t gumbel_argmax(size_t n, const LogP& logp, const Ex& ex, const Id& id, const RowNoise& noise,
                     double log_sum, bool score_every) {
  size_t best_i = n;
  for (size_t i = 0; i < n; ++i) {
    if (ex(i) > 0 && (best_i == n || ex(i) > ex(best_i))) best_i = i;
  }
  if (best_i == n) return n;
  double best = logp(best_i) + RowNoise::gumbel(noise.uniform(id(best_i)));
  double bar = skip_bar(best, log_sum, score_every);
  for (size_t i = 0; i < n; ++i) {
    if (i == best_i || !(ex(i) > 0)) continue;
    const double u = noise.uniform(id(i));
    if (ex(i) < (1.0 - u) * bar) continue;  // cannot reach best (skip_bar)
    const double sc = logp(i) + RowNoise::gumbel(u);
    if (sc > best || (sc == best && i < best_i)) {
      best = sc, best_i = i;
      bar = skip_bar(best, log_sum, score_every);
    }
  }
  return best_i;
}
}  // namespace

const char* spec_sampling_name(SpecSampling m) {
  return m == SpecSampling::Coupled ? "coupled" : "rejection";
}

double keyed_uniform(uint64_t seed, int64_t pos, int64_t token, NoiseStream stream) {
  return RowNoise(seed, pos, stream).uniform(token);
}

double keyed_gumbel(uint64_t seed, int64_t pos, int64_t token, NoiseStream stream) {
  return RowNoise::gumbel(keyed_uniform(seed, pos, token, stream));
}

void SamplerOptions::validate() const {
  if (!std::isfinite(temperature) || temperature < 0) {
    fail_setting<InputError>("temperature",
                             "the temperature must be a finite number >= 0, got {}", temperature);
  }
  if (top_k < 0) fail_setting<InputError>("top_k", "top-k must be >= 0 (0 = off), got {}", top_k);
  if (!(top_p > 0 && top_p <= 1)) {
    fail_setting<InputError>("top_p", "top-p must be in (0, 1] (1 = off), got {}", top_p);
  }
  if (!(min_p >= 0 && min_p < 1)) {
    fail_setting<InputError>("min_p", "min-p must be in [0, 1) (0 = off), got {}", min_p);
  }
}

double TokenDist::prob(int32_t id) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  return it != ids.end() && *it == id ? p[size_t(it - ids.begin())] : 0.0;
}

Sampler::Sampler(const SamplerOptions& o) : opt_(o) { o.validate(); }

void Sampler::keep(const float* logits, size_t n) {
  const double inv_t = 1.0 / double(opt_.temperature);
  auto z = [&](size_t c) {
    const float l = logits[c];
    return std::isnan(l) ? kNegInf : double(l) * inv_t;
  };
  cols_.clear();
  const bool top_k = opt_.top_k > 0 && size_t(opt_.top_k) < n;
  if (top_k) {
    // The k largest, ties to the lower column (= the lower id: ids ascend).
    order_.resize(n);
    for (size_t c = 0; c < n; ++c) order_[c] = {std::isnan(logits[c]) ? -INFINITY : logits[c], int32_t(c)};
    auto better = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    std::nth_element(order_.begin(), order_.begin() + opt_.top_k - 1, order_.end(), better);
    for (int i = 0; i < opt_.top_k; ++i) cols_.push_back(order_[size_t(i)].second);
    std::sort(cols_.begin(), cols_.end());
  } else {
    cols_.resize(n);
    for (size_t c = 0; c < n; ++c) cols_[c] = int32_t(c);
  }
  double mx = kNegInf;
  for (int32_t c : cols_) mx = std::max(mx, z(size_t(c)));
  logp_.resize(cols_.size());
  ex_.resize(cols_.size());
  double sum = 0;
  for (size_t i = 0; i < cols_.size(); ++i) {
    logp_[i] = z(size_t(cols_[i])) - mx;
    ex_[i] = std::exp(logp_[i]);
    sum += ex_[i];
  }
  if (opt_.top_p < 1.f) {
    // The smallest set of the most probable whose mass reaches top-p: the
    // prefix of the order (logp descending, then column) whose running sum
    // first reaches it. Only that prefix is sorted, grown 4× at a time (the
    // order is total, so a longer sorted prefix starts with the shorter one
    // and the running sum adds the same terms in the same order).
    order_.resize(cols_.size());
    for (size_t i = 0; i < cols_.size(); ++i) order_[i] = {float(logp_[i]), int32_t(i)};
    auto better = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    double cum = 0;
    size_t kept = 0, sorted = 0;
    while (kept < order_.size()) {
      if (kept == sorted) {
        const size_t next = std::min(order_.size(), std::max<size_t>(64, 4 * sorted));
        const auto lo = order_.begin() + std::ptrdiff_t(sorted), hi = order_.begin() + std::ptrdiff_t(next);
        if (hi != order_.end()) std::nth_element(lo, hi, order_.end(), better);
        std::sort(lo, hi, better);
        sorted = next;
      }
      cum += ex_[size_t(order_[kept++].second)] / sum;
      if (cum >= double(opt_.top_p)) break;
    }
    in_.assign(cols_.size(), 0);
    for (size_t i = 0; i < kept; ++i) in_[size_t(order_[i].second)] = 1;
    size_t w = 0;
    sum = 0;
    for (size_t i = 0; i < cols_.size(); ++i) {
      if (!in_[i]) continue;
      cols_[w] = cols_[i], logp_[w] = logp_[i], ex_[w] = ex_[i], ++w;
      sum += ex_[i];
    }
    cols_.resize(w), logp_.resize(w), ex_.resize(w);
  }
  if (opt_.min_p > 0.f) {
    // Relative to the largest probability (logp 0 is the maximum).
    const double floor = std::log(double(opt_.min_p));
    size_t w = 0;
    sum = 0;
    for (size_t i = 0; i < cols_.size(); ++i) {
      if (logp_[i] < floor) continue;
      cols_[w] = cols_[i], logp_[w] = logp_[i], ex_[w] = ex_[i], ++w;
      sum += ex_[i];
    }
    cols_.resize(w), logp_.resize(w), ex_.resize(w);
  }
  log_sum_ = std::log(sum);
  for (double& l : logp_) l -= log_sum_;
}

int32_t Sampler::sample(const float* logits, size_t n, int64_t pos, const int32_t* ids,
                        NoiseStream stream) {
  auto id_of = [&](size_t c) { return ids ? ids[c] : int32_t(c); };
  // A NaN logit never wins (kernels::argmax), but a row of nothing but NaN
  // means the forward overflowed (weights of ~1e38 pass the load checks for
  // NaN/Inf): it emitted token 0 at every step, with exit 0. The scan stops
  // at the first number, almost always column 0.
  if (std::all_of(logits, logits + n, [](float x) { return std::isnan(x); })) {
    fail<InputError>("the model's logits at position {} are all NaN: its forward pass overflows "
                     "fp32 — the checkpoint's weights are broken", pos);
  }
  if (greedy()) return id_of(kernels::argmax(logits, n));
  keep(logits, n);
  if (opt_.sequential_noise_fault) pos = draws_++;
  const RowNoise noise(opt_.seed, pos, stream);
  const size_t best_i = gumbel_argmax(
      cols_.size(), [&](size_t i) { return logp_[i]; }, [&](size_t i) { return ex_[i]; },
      [&](size_t i) { return id_of(size_t(cols_[i])); }, noise, log_sum_,
      opt_.score_every_candidate);
  if (best_i == cols_.size()) return id_of(kernels::argmax(logits, n));
  return id_of(size_t(cols_[best_i]));
}

void Sampler::distribution(const float* logits, size_t n, const int32_t* ids, TokenDist& out) {
  MTP_CHECK(!greedy(), "a distribution at temperature 0 is a point mass; use sample()");
  keep(logits, n);
  out.ids.clear();
  out.p.clear();
  for (size_t i = 0; i < cols_.size(); ++i) {
    if (logp_[i] == kNegInf) continue;
    out.ids.push_back(ids ? ids[size_t(cols_[i])] : cols_[i]);
    out.p.push_back(std::exp(logp_[i]));
  }
}

void Sampler::top(const float* logits, size_t n, int64_t pos, const int32_t* ids, size_t w,
                  bool with_prob, std::vector<Candidate>& out, NoiseStream stream) {
  auto id_of = [&](size_t c) { return ids ? ids[c] : int32_t(c); };
  // (score, column) pairs; better = higher score, then lower column (= id).
  scored_.clear();
  double log_sum = 0;  // temperature 0: log Σ exp(l - max) for the probabilities
  float mx = 0;
  if (greedy()) {
    for (size_t c = 0; c < n; ++c) {
      if (!std::isnan(logits[c])) scored_.push_back({double(logits[c]), int32_t(c)});
    }
    if (with_prob && !scored_.empty()) {
      mx = logits[kernels::argmax(logits, n)];
      double sum = 0;
      for (const auto& [l, c] : scored_) sum += std::exp(l - double(mx));
      log_sum = std::log(sum);
    }
  } else {
    keep(logits, n);
    const RowNoise noise(opt_.seed, pos, stream);
    // The w most probable are scored exactly; the lowest of their scores is a
    // floor the w-th best reaches, so candidates that cannot reach it are
    // skipped (skip_bar) and the w best are all among the scored.
    order_.clear();
    for (size_t i = 0; i < cols_.size(); ++i) {
      if (logp_[i] != kNegInf) order_.push_back({float(logp_[i]), int32_t(i)});
    }
    const size_t first = std::min(w, order_.size());
    std::nth_element(order_.begin(), order_.begin() + std::ptrdiff_t(first), order_.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    in_.assign(cols_.size(), 0);
    double floor = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < first; ++j) {
      const size_t i = size_t(order_[j].second);
      const double s = logp_[i] + RowNoise::gumbel(noise.uniform(id_of(size_t(cols_[i]))));
      scored_.push_back({s, int32_t(i)});
      floor = std::min(floor, s);
      in_[i] = 1;
    }
    const double bar = skip_bar(floor, log_sum_, opt_.score_every_candidate);
    for (size_t i = 0; i < cols_.size(); ++i) {
      if (in_[i] || logp_[i] == kNegInf) continue;
      const double u = noise.uniform(id_of(size_t(cols_[i])));
      if (ex_[i] < (1.0 - u) * bar) continue;
      scored_.push_back({logp_[i] + RowNoise::gumbel(u), int32_t(i)});
    }
  }
  const size_t k = std::min(w, scored_.size());
  auto better = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::partial_sort(scored_.begin(), scored_.begin() + std::ptrdiff_t(k), scored_.end(), better);
  out.clear();
  for (size_t i = 0; i < k; ++i) {
    const int32_t c = scored_[i].second;
    if (greedy()) {
      out.push_back({id_of(size_t(c)), with_prob ? std::exp(scored_[i].first - mx - log_sum) : 0.0});
    } else {
      out.push_back({id_of(size_t(cols_[size_t(c)])), with_prob ? std::exp(logp_[size_t(c)]) : 0.0});
    }
  }
}

int32_t sample_dist(const TokenDist& d, uint64_t seed, int64_t pos, NoiseStream stream) {
  // log p + g over the ids with p > 0 (log_sum 0: s = log p + g ≤ log(p /
  // (1 − u)) holds whatever p sums to).
  const size_t i = gumbel_argmax(
      d.ids.size(), [&](size_t j) { return std::log(d.p[j]); }, [&](size_t j) { return d.p[j]; },
      [&](size_t j) { return d.ids[j]; }, RowNoise(seed, pos, stream), 0.0, false);
  return i == d.ids.size() ? -1 : d.ids[i];
}

}  // namespace mtp::speculative
