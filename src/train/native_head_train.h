// Fine-tuning a checkpoint's native MTP head (Qwen3.5's mtp.*) against the
// exact target the engine serves: `mtpspec train-native-head`
// (train_cli/cmd_train_native_head.cc). Mirrors train/assistant_train.h.
//
// Online against the engine: every step takes a window of the token stream,
// runs the target through the ENGINE (any checkpoint it loads: Hugging Face,
// GGUF, quantized) for the head's input — the target's hidden AFTER its
// final norm, the capture point native-mtp drafts with
// (drafter::Capture::PostNormHidden) — and trains the head in libtorch
// (train/qwen35_torch.h native_head_forward) teacher-forced as it drafts:
// row t embeds token t + 1, reads h_t and is scored (cross-entropy over the
// full head) against the target's own argmax at t + 1, the token that
// follows token t + 1 in greedy decoding. The target's embedding and head
// are the engine's values (dequantized), frozen.
//
// Starts from the head of the init checkpoint (--init-from; default the
// target) and writes that checkpoint again with the new head, in its own
// format: a Hugging Face Qwen3.5 directory with the new mtp.* (fp32) beside
// its other tensors as stored and its other files (config.json unchanged),
// which the engine and transformers load like the original; a GGUF file
// with the new blk.{n}.nextn.* block (F32) beside every other tensor and key
// as stored (train/native_head_gguf.h), which the engine and llama.cpp load
// as the target with its head. Then the parity gate:
// the engine's head loaded from the written directory against the libtorch
// head on held-out windows of the served target's capture, argmax equal on
// every row whose libtorch top-2 margin exceeds 2·tol (tol from the
// dimensions, as train/parity.h); a failed gate removes the output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mtp::train {

struct NativeHeadTrainOptions {
  std::string target;     // the served target (any format the engine loads)
  std::string init_from;  // a Qwen3.5 checkpoint holding the head (HF directory or GGUF); "" = target
  std::string tokens;     // a pretraining tokens file (io/pretrain_data.h): train / held-out streams
  std::string out;        // the directory (HF init) or GGUF file (GGUF init) written
  int steps = 100, seq_len = 64;
  double lr = 1e-4;
  uint64_t seed = 0;
  int parity_windows = 4;  // held-out (else training) windows of seq_len the gate compares
};

struct NativeHeadTrainResult {
  std::vector<double> losses;  // per step
  long parity_rows = 0, parity_decided = 0, parity_agreed = 0;
  double parity_max_dlogit = 0, parity_tol = 0;
  bool parity_passed = false;
};

// The path of the checkpoint the head starts from and that is written again.
inline const std::string& native_head_init(const NativeHeadTrainOptions& o) {
  return o.init_from.empty() ? o.target : o.init_from;
}
// Whether the output is a GGUF file (a GGUF init) rather than a directory.
bool native_head_writes_gguf(const NativeHeadTrainOptions& o);

// InputError for options out of range, a target without a native head, or an
// init checkpoint whose head does not fit the target; the loaders' errors for
// files that do not load; ConfigError when the parity gate fails.
NativeHeadTrainResult train_native_head(const NativeHeadTrainOptions& o);

}  // namespace mtp::train
