// Timing the target's forward at a fixed context length: the basis of the
// verify multiplier m(q) = time(forward of q) / time(forward of 1)
// (docs/SEMANTICS.md "Measurement"). q values are interleaved call by call so a
// drift in machine speed hits all of them alike; medians are reported.
#pragma once
#include <vector>

#include "model/forward.h"
#include "speculative/sampler.h"
#include "speculative/target_session.h"

namespace mtp::speculative {

// [q - 1] = median seconds of one forward of q rows (with logits) at positions
// pos .. pos + q - 1, q = 1..q_max, after `pos` positions of random context.
std::vector<double> forward_times(const model::Model& m, int pos, int q_max, int reps,
                                  ThreadPool* pool);

// A quick curve for the union's gate (gate.h): seconds of a q-row forward at
// the session's next positions for q = 1..q_max (capped by its context),
// timed once each at q = 1, 2 and q_max and linear in between — about three
// decode steps of work — then rolled back (the rows written past forwarded()
// are rewritten by the next forward before anything reads them).
std::vector<double> session_forward_times(TargetSession& s, int q_max);

// Median seconds of one Sampler::sample (sampler.h: truncation and the keyed
// Gumbel noise for every kept candidate) on a logits row of `vocab` random
// values (normal, sd 3: a spread like real logits), a fresh position per call.
double sampling_seconds(size_t vocab, const SamplerOptions& o, int reps);

}  // namespace mtp::speculative
