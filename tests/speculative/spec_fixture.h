// Targets and random drafters for the speculative tests: a checkpoint loaded
// with its fingerprint, and a random drafter made for it (in memory).
#pragma once
#include <memory>
#include <string>

#include "drafter/drafter.h"
#include "model/forward.h"

namespace mtp::test {

struct Target {
  std::unique_ptr<model::Model> model;
  std::string fingerprint;
};

Target load_target(const std::string& path);

// A random K-module drafter for t (fp32, exactly as a stored one loads).
drafter::Drafter random_drafter(const Target& t, int K, uint64_t seed);

}  // namespace mtp::test
