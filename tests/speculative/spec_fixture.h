// Targets and random drafters for the speculative tests: a checkpoint loaded
// with its fingerprint, and a random drafter made for it (in memory).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "drafter/drafter.h"
#include "model/forward.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/scheduler.h"

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

// generate() of request r without speculation, at context ctx: what every
// speculating run of r must print.
speculative::GenerateResult plain_generate(const Target& t, const speculative::Request& r,
                                           int ctx);

// Submits rs to s and steps it until it is idle: each request's result (by
// its index in rs; null if it never finished) and the count of token events
// a source drafted.
struct SchedulerRun {
  std::vector<std::shared_ptr<const speculative::SequenceResult>> results;
  long drafted_tokens = 0;
};
SchedulerRun run_requests(speculative::Scheduler& s, const std::vector<speculative::Request>& rs);

}  // namespace mtp::test
