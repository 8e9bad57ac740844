// A training run's checkpoint: RUN_DIR/checkpoint.safetensors.
//
// Holds everything a resumed run needs to continue bit for bit: the flat fp32
// parameters, AdamW's first and second moments, the EMA weights, and a JSON
// `state` (__metadata__["state"]) with the step, the data cursor, the options
// that fix the trajectory, the target (fingerprint, path, architecture), the
// drafter config, the flat layout (tensor name, offset, shape) and the last
// evaluation. The data order and the initial weights are pure functions of the
// seed (train/data.h), so (seed, step) is the whole RNG state.
//
// Tensors: params, adam_m, adam_v [P] F32 and ema [P] F32 (absent when EMA is
// off). Written with io::write_safetensors: temp file + rename, so a crash
// leaves the previous checkpoint intact.
#pragma once
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mtp::train {

inline constexpr const char* kCheckpointFormat = "mtpspec-train-checkpoint";
inline constexpr int kCheckpointVersion = 1;

struct Checkpoint {
  nlohmann::json state;
  std::vector<float> params, adam_m, adam_v, ema;  // ema empty when EMA is off
};

std::string checkpoint_path(const std::string& run_dir);
void save_checkpoint(const std::string& path, const Checkpoint& c);
// IoError when missing; FormatError when it is not a checkpoint of this format.
Checkpoint load_checkpoint(const std::string& path);

// The drafter tensors of a checkpoint by name (EMA or raw weights), using the
// layout stored in its state. InputError when ema is asked of a run without EMA.
std::map<std::string, std::vector<float>> checkpoint_tensors(const Checkpoint& c, bool ema);

// Resuming `run_dir` from c: InputError naming the first key of `trajectory`
// (what fixes the run's course) whose value differs from c.state["trajectory"];
// `same` says what a resumed run must keep ("the same flags, shards and target").
void check_trajectory(const Checkpoint& c, const nlohmann::json& trajectory,
                      const std::string& run_dir, const std::string& same);

// The checkpoint `path` of the run folder `run_dir` when there is one, checked
// for resuming: InputError unless `resume` ("'DIR' already holds a KIND
// checkpoint (step S of T): resume it ...", about the setting "resume"), then
// check_trajectory.
// nullopt when there is none (a fresh run).
std::optional<Checkpoint> checkpoint_to_resume(const std::string& path, bool resume,
                                               const nlohmann::json& trajectory,
                                               const std::string& run_dir,
                                               const std::string& kind, const std::string& same);

// A run folder's metrics.jsonl (one JSON record per line, each with a "step"):
// on resume (resumed = true) rewritten without the records the resumed run
// repeats — those after `step`, and the "parity" records, which are written
// after the final checkpoint at its step; a fresh run (resumed = false)
// empties it (a run killed before its first checkpoint left lines there).
// Then opened for appending. IoError when unwritable.
std::ofstream open_metrics(const std::string& path, long step, bool resumed);

}  // namespace mtp::train
