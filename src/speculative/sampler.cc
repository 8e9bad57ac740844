#include "speculative/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
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
}  // namespace

const char* spec_sampling_name(SpecSampling m) {
  return m == SpecSampling::Coupled ? "coupled" : "rejection";
}

double keyed_uniform(uint64_t seed, int64_t pos, int64_t token, NoiseStream stream) {
  uint64_t h = mix(seed);
  h = mix(h ^ uint64_t(pos));
  h = mix(h ^ uint64_t(token));
  h = mix(h ^ uint64_t(stream));
  return (double(h >> 11) + 0.5) * 0x1p-53;  // (0, 1): never 0 or 1
}

double keyed_gumbel(uint64_t seed, int64_t pos, int64_t token, NoiseStream stream) {
  return -std::log(-std::log(keyed_uniform(seed, pos, token, stream)));
}

void SamplerOptions::validate() const {
  if (!std::isfinite(temperature) || temperature < 0) {
    fail<InputError>("--temp (temperature) must be a finite number >= 0, got {}", temperature);
  }
  if (top_k < 0) fail<InputError>("--top-k must be >= 0 (0 = off), got {}", top_k);
  if (!(top_p > 0 && top_p <= 1)) {
    fail<InputError>("--top-p must be in (0, 1] (1 = off), got {}", top_p);
  }
  if (!(min_p >= 0 && min_p < 1)) {
    fail<InputError>("--min-p must be in [0, 1) (0 = off), got {}", min_p);
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
  double sum = 0;
  for (size_t i = 0; i < cols_.size(); ++i) {
    logp_[i] = z(size_t(cols_[i])) - mx;
    sum += std::exp(logp_[i]);
  }
  if (opt_.top_p < 1.f) {
    // The smallest set of the most probable whose mass reaches top-p.
    order_.resize(cols_.size());
    for (size_t i = 0; i < cols_.size(); ++i) order_[i] = {float(logp_[i]), int32_t(i)};
    std::sort(order_.begin(), order_.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    double cum = 0;
    size_t kept = 0;
    while (kept < order_.size()) {
      cum += std::exp(logp_[size_t(order_[kept++].second)]) / sum;
      if (cum >= double(opt_.top_p)) break;
    }
    std::vector<uint8_t> in(cols_.size(), 0);
    for (size_t i = 0; i < kept; ++i) in[size_t(order_[i].second)] = 1;
    size_t w = 0;
    sum = 0;
    for (size_t i = 0; i < cols_.size(); ++i) {
      if (!in[i]) continue;
      cols_[w] = cols_[i], logp_[w] = logp_[i], ++w;
      sum += std::exp(logp_[i]);
    }
    cols_.resize(w), logp_.resize(w);
  }
  if (opt_.min_p > 0.f) {
    // Relative to the largest probability (logp 0 is the maximum).
    const double floor = std::log(double(opt_.min_p));
    size_t w = 0;
    sum = 0;
    for (size_t i = 0; i < cols_.size(); ++i) {
      if (logp_[i] < floor) continue;
      cols_[w] = cols_[i], logp_[w] = logp_[i], ++w;
      sum += std::exp(logp_[i]);
    }
    cols_.resize(w), logp_.resize(w);
  }
  const double log_sum = std::log(sum);
  for (double& l : logp_) l -= log_sum;
}

int32_t Sampler::sample(const float* logits, size_t n, int64_t pos, const int32_t* ids,
                        NoiseStream stream) {
  auto id_of = [&](size_t c) { return ids ? ids[c] : int32_t(c); };
  if (greedy()) return id_of(kernels::argmax(logits, n));
  keep(logits, n);
  if (opt_.sequential_noise_fault) pos = draws_++;
  double best = kNegInf;
  int32_t best_id = -1;
  for (size_t i = 0; i < cols_.size(); ++i) {
    if (logp_[i] == kNegInf) continue;
    const int32_t id = id_of(size_t(cols_[i]));
    const double s = logp_[i] + keyed_gumbel(opt_.seed, pos, id, stream);
    if (s > best) best = s, best_id = id;  // ascending ids: ties to the lower one
  }
  return best_id >= 0 ? best_id : id_of(kernels::argmax(logits, n));
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
    for (size_t i = 0; i < cols_.size(); ++i) {
      if (logp_[i] == kNegInf) continue;
      scored_.push_back({logp_[i] + keyed_gumbel(opt_.seed, pos, id_of(size_t(cols_[i])), stream),
                         int32_t(i)});
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
  double best = kNegInf;
  int32_t best_id = -1;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    if (!(d.p[i] > 0)) continue;
    const double s = std::log(d.p[i]) + keyed_gumbel(seed, pos, d.ids[i], stream);
    if (s > best) best = s, best_id = d.ids[i];
  }
  return best_id;
}

}  // namespace mtp::speculative
