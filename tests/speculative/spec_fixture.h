// Targets and random drafters for the speculative tests: a checkpoint loaded
// with its fingerprint, and a random drafter made for it (in memory).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "drafter/drafter.h"
#include "model/forward.h"
#include "speculative/scheduler/generate.h"

namespace mtp::test {

struct Target {
  std::unique_ptr<model::Model> model;
  std::string fingerprint;
};

Target load_target(const std::string& path, kernels::WeightType wt = kernels::WeightType::F32);

// A random K-module drafter for t, exactly as a stored one loads: module
// attention window `window` (0 = full), an optional draft vocabulary, its
// matrices stored as `stored` (held so: BF16 stays BF16).
drafter::Drafter random_drafter(const Target& t, int K, uint64_t seed, int window = 0,
                                std::vector<int32_t> draft_vocab = {},
                                DType stored = DType::F32);

// A request's settings as generate()'s options (n_new, sampling, stop strings).
inline speculative::GenerateOptions options_of(const speculative::Request& r) {
  speculative::GenerateOptions go;
  go.n_new = r.n_new;
  go.sampler = r.sampler;
  go.stop = r.stop;
  return go;
}

}  // namespace mtp::test
