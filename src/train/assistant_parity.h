// The assistant's parity gate: the engine's assistant (loaded from the
// directory the trainer wrote, as every user loads it) and the libtorch twin
// (train/assistant_torch.h) draft steps 1..K on the same committed text:
//   - the engine runs its teacher-forced replay
//     (drafter::assistant_teacher_forced: exactly the inputs its live chain
//     sees, every step fed its own draft, the centroid head's selection
//     included);
//   - the twin runs its chain over the same capture, fed the engine's drafts
//     (so both sides' step j has the same token; the state, position and
//     keys are each side's own).
// Step j passes when every score the engine computed is within
// tol_j = fp32_tolerance(j + 1, n, max |score|) of the twin's (n: the
// longest reduction) and the twin's argmax over the engine's scored tokens
// equals the engine's draft on every row whose twin top-2 margin exceeds
// 2·tol_j (closer rows are near ties: counted, not gated).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drafter/gemma4_assistant.h"
#include "model/forward.h"
#include "train/assistant_torch.h"

namespace mtp::train {

struct AssistantStepParity {
  double max_dlogit = 0, tol = 0, scale = 0;
  long rows = 0, decided = 0, agreed = 0, near_ties = 0;
  bool passed = false;
};

struct AssistantParity {
  std::vector<AssistantStepParity> steps;  // [K]
  bool passed = false;
  std::string text() const;  // a table, one line per step
  nlohmann::json to_json() const;
};

// tokens: the committed text (>= 3 tokens); K >= 1 steps; step_shift as
// TorchAssistant::chain (0 but in tests). Does not throw on failure.
AssistantParity assistant_parity(const model::Model& target, const drafter::Gemma4Assistant& engine,
                                 const TorchAssistant& twin, const std::vector<torch::Tensor>& params,
                                 const std::vector<int32_t>& tokens, int K, int step_shift = 0);

}  // namespace mtp::train
