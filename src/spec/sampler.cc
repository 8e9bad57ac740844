#include "spec/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/ops.h"

namespace mtp::spec {

Sampler::Sampler(const SamplerOptions& o) : opt_(o), rng_(o.seed) {
  if (!(o.temperature >= 0.f) || !std::isfinite(o.temperature)) {
    fail<InputError>("temperature must be a finite number >= 0, got {}", o.temperature);
  }
  if (!(o.top_p > 0.f && o.top_p <= 1.f)) {
    fail<InputError>("top-p must be in (0, 1], got {}", o.top_p);
  }
}

int32_t Sampler::sample(const float* logits, size_t vocab) {
  if (greedy()) return int32_t(kernels::argmax(logits, vocab));
  // Softmax at temperature, in double for the normalisation.
  float mx = logits[kernels::argmax(logits, vocab)];
  probs_.resize(vocab);
  double sum = 0;
  for (size_t i = 0; i < vocab; ++i) {
    float p = std::isnan(logits[i]) ? 0.f : std::exp((logits[i] - mx) / opt_.temperature);
    probs_[i] = {p, int32_t(i)};
    sum += p;
  }
  size_t n = vocab;
  if (opt_.top_p < 1.f) {
    std::sort(probs_.begin(), probs_.end(), [](auto& a, auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    double cum = 0;
    for (n = 0; n < vocab;) {
      cum += probs_[n++].first / sum;
      if (cum >= opt_.top_p) break;
    }
    sum = 0;
    for (size_t i = 0; i < n; ++i) sum += probs_[i].first;
  }
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng_);
  for (size_t i = 0; i < n; ++i) {
    u -= probs_[i].first;
    if (u < 0) return probs_[i].second;
  }
  return probs_[n - 1].second;
}

}  // namespace mtp::spec
