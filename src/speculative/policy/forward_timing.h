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

// A quick curve for the union's gate (gate.h): seconds of a q-row forward at
// the session's next positions for q = 1..q_max (capped by its context),
// timed once each at q = 1, 2 and q_max and linear in between — about three
// decode steps of work — then rolled back (the rows written past forwarded()
// are rewritten by the next forward before anything reads them).
std::vector<double> session_forward_times(TargetSession& s, int q_max);

// The same curve from work a generation does anyway: prefills `prompt` (as
// TargetSession::prefill, the last row's logits into last_logits) with its
// last rows forwarded as timed calls of q_max, 2 and 1 rows. A row's result
// does not depend on which rows share its call (batch invariance), so cache,
// capture and logits are bitwise those of one prefill; only the ~3 decode
// steps of dummy rows are saved. Empty (and the prompt prefilled plainly) when
// the prompt has fewer than q_max + 4 tokens or q_max exceeds one call: the
// caller then times dummy rows with session_forward_times.
std::vector<double> prefill_timed(TargetSession& s, std::span<const int32_t> prompt, int q_max,
                                  float* last_logits);

// Median seconds of one Sampler::sample (sampler.h: truncation and the keyed
// Gumbel noise for every kept candidate) on a logits row of `vocab` random
// values (normal, sd 3: a spread like real logits), a fresh position per call.
double sampling_seconds(size_t vocab, const SamplerOptions& o, int reps);

}  // namespace mtp::speculative
