// The drift harness: does speculation change the output, and why?
//
// For one prompt it generates n tokens twice (greedy, or sampled with the same
// seed), ignoring stop tokens:
//  - decode path: one-token forwards only (q = 1);
//  - speculative path: verify calls of q = K + 1 only. Without a drafter, an
//    oracle proposes the decode stream itself (every `miss_every`-th cycle its
//    last draft is deliberately wrong, so rollbacks happen too); with one, the
//    MTP drafter proposes.
// It reports the first position where the streams differ, the flip rate, and
// the largest |Δlogit| between a decode row and the verify row that chose the
// same position with the same context — separating the causes the earlier
// work confused:
//  - numerics: same inputs, different q → max_abs_dlogit (0 with our kernels;
//    > 0 with --verify-kernels blas);
//  - protocol: rejected K/V left behind → flips (--inject-fault stale-kv proves
//    the harness catches it);
//  - methodology: teacher-forced vs live acceptance → `mtpspec bench`.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drafter/drafter.h"
#include "model/forward.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::speculative {

struct DriftOptions {
  int n = 64;                    // tokens per path
  int draft_k = 3;               // K
  int miss_every = 4;            // oracle: every n-th cycle's last draft is wrong (0 = never)
  bool stale_kv_fault = false;   // inject the protocol fault
  const drafter::Drafter* drafter = nullptr;
  int ctx = 0;                   // 0 = prompt + n + K + 1
  // Both paths sample with these (keyed noise, sampler.h): with coupled
  // sampling the streams must still agree token for token; with rejection
  // sampling they legitimately differ. The oracle proposes the decode stream.
  SamplerOptions sampling;
  SpecSampling mode = SpecSampling::Coupled;
};

struct DriftResult {
  std::optional<int> first_flip;  // index into the generated tokens
  double flip_rate = 0;           // differing positions / the shorter length
  double max_abs_dlogit = 0;      // over positions before the first flip
  int compared = 0;               // positions whose logits were compared
  std::vector<int32_t> decode_tokens, spec_tokens;
  SpecStats stats;
};

// A drift run over a prompt set (the "summary" object of `drift --json`);
// from_json reads what to_json wrote (FormatError otherwise).
struct DriftSummary {
  long prompts = 0, flipped = 0;  // prompts whose streams differed
  double max_abs_dlogit = 0;
  int n = 0, draft_k = 0;
  std::string verify_kernels, inject_fault, proposer;
  nlohmann::json sampling;  // the sampling settings both paths used
  nlohmann::json to_json() const;
  static DriftSummary from_json(const nlohmann::json& j);
};

DriftResult drift_one(const model::Model& m, const std::vector<int32_t>& prompt_ids,
                      const DriftOptions& o, ThreadPool* pool);

}  // namespace mtp::speculative
