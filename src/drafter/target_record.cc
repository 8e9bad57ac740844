#include "drafter/target_record.h"

#include <fmt/core.h>

#include "core/error.h"
#include "core/setting.h"

namespace mtp::drafter {

void check_drafter_target(const std::string& path, const std::string& recorded,
                          const std::string& recorded_arch, const model::ModelConfig& target,
                          const ServedTarget& served) {
  if (recorded == served.fingerprint) return;
  // A fingerprint covers the stored bytes (model/fingerprint.h): a GGUF, F16
  // or quantized copy of the checkpoint a drafter was trained on is another
  // target, whose outputs (and so acceptance) may differ.
  const std::string why = fmt::format(
      "drafter '{}' was trained for target {} ({}); this target is {} ({}, {} weights). A "
      "target's fingerprint is that of its stored bytes, so a GGUF, F16 or quantized copy of "
      "the checkpoint a drafter was trained on is another target",
      path, recorded.empty() ? "<none>" : recorded, recorded_arch.empty() ? "?" : recorded_arch,
      served.fingerprint, model::arch_name(target.arch), target.source);
  if (served.mismatch == TargetMismatch::Refuse) {
    fail_setting<ConfigError>("drafter_target_mismatch",
                              "{}. Train a drafter for this model (mtpspec "
                              "precompute/train/export), or set the target-mismatch policy to "
                              "warn to run it anyway", why);
  }
  warn_setting("drafter_target_mismatch",
               fmt::format("{}; running it anyway (the target-mismatch policy is warn): the "
                           "output is still the target's, acceptance may be lower", why));
}

}  // namespace mtp::drafter
