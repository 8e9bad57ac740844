// The drafter run teacher-forced over a whole token sequence, as training does
// (the module-row contract, drafter/module_rows.h): module k at row t sees the
// target's capture (k = 0) or module k-1's output at row t, and the true token
// tok[t+k+1]. Used by the live ≡ teacher-forced test (docs/INVARIANTS.md,
// invariant 6), by bench's teacher-forced accuracy and by the training tests.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "drafter/drafter.h"
#include "model/forward.h"

namespace mtp::drafter {

struct TeacherForced {
  // [k][t] for t = 0 .. N-2-k: module k's argmax at row t (its guess for
  // tok[t+k+2]) and that row's largest logit.
  std::vector<std::vector<int32_t>> argmax;
  std::vector<std::vector<float>> max_logit;
  // [k]: fraction of rows with tok[t+k+2] inside the sequence that were right.
  std::vector<double> accuracy;
  std::vector<long> rows;  // [k]: how many rows were scored
};

TeacherForced teacher_forced(const model::Model& m, const Drafter& d,
                             std::span<const int32_t> tokens, ThreadPool* pool);

}  // namespace mtp::drafter
