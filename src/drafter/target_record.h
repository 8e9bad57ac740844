// The target a drafter was trained against, and the one rule every drafter
// kind follows when the engine loads it for a target (docs/SEMANTICS.md
// "Target fingerprint"): a drafter records the fingerprint
// (model/fingerprint.h) of the target whose outputs it learned; loaded for a
// target of another fingerprint it is refused unless the caller's policy is
// to warn. The output never depends on it (verification decides every
// token); only acceptance does.
#pragma once
#include <string>

#include "model/config.h"

namespace mtp::drafter {

// What a load does when the recorded fingerprint is not the target's
// (setting "drafter_target_mismatch"): refuse (ConfigError), or load it with
// one warning line.
enum class TargetMismatch { Refuse, Warn };

// The target being served, as a drafter's load checks it.
struct ServedTarget {
  std::string fingerprint;  // model::target_fingerprint of the loaded target
  TargetMismatch mismatch = TargetMismatch::Refuse;
};

// ConfigError (setting drafter_target_mismatch) naming the drafter `path`,
// both fingerprints, the recorded architecture and the target's, when
// `recorded` (the drafter's record, "" = none) is not `served.fingerprint`
// and the policy is Refuse; a warning when it is Warn. Callers whose drafter
// kind may carry no record (published files) handle "" before calling.
void check_drafter_target(const std::string& path, const std::string& recorded,
                          const std::string& recorded_arch, const model::ModelConfig& target,
                          const ServedTarget& served);

}  // namespace mtp::drafter
