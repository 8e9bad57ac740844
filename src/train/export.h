// `mtpspec export` and `mtpspec parity` over a training run (plain C++).
//
// export: the run's checkpoint (raw or EMA weights) -> a drafter file
// (drafter::write_drafter) for the target recorded in the run, with a
// `training` summary in its metadata: kind, weights ("raw" | "ema"), steps,
// the last held-out evaluation, the shards (folder, corpus, counts), the
// engine's SIMD target, torch version. The file is written under a temporary
// name, checked with the parity gate, and only then renamed into place.
//
// parity: the run's libtorch modules (the weights the drafter file says it was
// exported from) against the engine modules loaded from the drafter file.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "drafter/drafter.h"
#include "train/parity.h"

namespace mtp::train {

struct ExportOptions {
  std::string run_dir, out;
  std::string model;        // "" = the target path recorded in the run
  std::string shards_dir;   // parity inputs; "" = the run's shards if present
  bool ema = false;
  drafter::DrafterStorage stored;  // fp32, bf16 or a ggml block type (drafter/drafter.h)
  int draft_vocab = 0;      // > 0: draft among the n most frequent training labels
  bool parity = true;
  int threads = 0;          // 0 = physical cores
  bool verbose = true;
};

struct ExportReport {
  long step = 0;
  long draft_vocab = 0;      // size written (0 = the whole vocabulary)
  double draft_coverage = 1;  // fraction of the training labels inside it
  std::string fingerprint;
  bool parity_ran = false;
  ParityReport parity;
};

// Throws mtp::Error subclasses; a failed parity gate throws (and removes the file).
ExportReport export_drafter(const ExportOptions& o);

struct RunParityOptions {
  std::string model, drafter, run_dir, shards_dir;
  int threads = 0;
};

// Loads the target, the drafter file (refused for another target) and the run;
// picks raw or EMA weights from the drafter's training metadata ("weights").
// Does not throw on a failed gate: check .passed.
ParityReport parity_for_run(const RunParityOptions& o);

}  // namespace mtp::train
