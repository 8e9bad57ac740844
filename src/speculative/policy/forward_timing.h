// Timing the target's forward at a fixed context length: the basis of the
// verify multiplier m(q) = time(forward of q) / time(forward of 1)
// (docs/SEMANTICS.md "Measurement"). q values are interleaved call by call so a
// drift in machine speed hits all of them alike; medians are reported.
#pragma once
#include <vector>

#include "model/forward.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/target_session.h"

namespace mtp::speculative {

// [q - 1] = median seconds of one forward of q rows (with logits) at positions
// pos .. pos + q - 1, q = 1..q_max, after `pos` positions of random context.
std::vector<double> forward_times(const model::Model& m, int pos, int q_max, int reps,
                                  ThreadPool* pool);

// Median seconds of one Sampler::sample (sampler.h: truncation and the keyed
// Gumbel noise for every kept candidate) on a logits row of `vocab` random
// values (normal, sd 3: a spread like real logits), a fresh position per call.
double sampling_seconds(size_t vocab, const SamplerOptions& o, int reps);

}  // namespace mtp::speculative
