// Token selection from one row of logits.
// temperature 0: argmax, ties to the lowest index (the same rule everywhere:
// verify's accept test compares drafts with exactly this choice).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace mtp::spec {

struct SamplerOptions {
  float temperature = 0.f;  // 0 = greedy
  float top_p = 1.f;        // nucleus mass in (0, 1]
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& o);
  bool greedy() const { return opt_.temperature <= 0.f; }
  int32_t sample(const float* logits, size_t vocab);

 private:
  SamplerOptions opt_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> probs_;
};

}  // namespace mtp::spec
