// The bit-exactness property check, shared by the tests of every architecture.
#pragma once
#include "model/forward.h"

namespace mtp::test {

// Runs random token sequences through `m` as (1) one-token forwards and (2)
// calls of random sizes q in 2..16, with two sequences interleaved in one call,
// rollbacks (truncate) and replays of other tokens; expects every row's logits
// and capture hidden to be bitwise equal to the one-token reference.
void check_bit_exact(const model::Model& m, int threads, unsigned seed, int n_tokens);

}  // namespace mtp::test
