// The subcommands that live in bin/mtpspec-train (libtorch) and that `mtpspec`
// forwards to it: one table, so both executables' --help say the same.
#pragma once

namespace mtp::cli {

struct TrainCommand {
  const char* name;
  const char* help;
};

inline constexpr TrainCommand kTrain{
    "train", "Train the MTP drafter modules against the frozen target on precomputed shards, "
             "or online (--online: the target computes the capture as training runs); "
             "--drafter-arch gemma4-assistant --online trains Gemma 4's assistant instead"};
inline constexpr TrainCommand kExport{
    "export", "Write the drafter file of a training run (checked by the parity gate)"};
inline constexpr TrainCommand kParity{
    "parity", "Check that the engine's drafter modules reproduce the trained (libtorch) ones"};
inline constexpr TrainCommand kTrainAssistant{
    "train-assistant",
    "Train Gemma 4's assistant (from scratch, or fine-tuned from --init-from) against the "
    "exact target the engine serves, online"};
inline constexpr TrainCommand kTrainNativeHead{
    "train-native-head",
    "Fine-tune a Qwen3.5 checkpoint's native MTP head (mtp.*) against the exact target the "
    "engine serves, online; writes the checkpoint again with the new head"};
// Forwarded by `mtpspec pretrain` after it prepared the data (not a user command).
inline constexpr TrainCommand kPretrainModel{
    "pretrain-model", "Internal: the training half of `mtpspec pretrain` (run that instead)"};

}  // namespace mtp::cli
