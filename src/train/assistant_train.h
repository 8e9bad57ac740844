// Training Gemma 4's assistant against the exact target the engine serves:
// `mtpspec train-assistant` (train_cli/cmd_train_assistant.cc).
//
// Online against the engine: every step takes a window of the token stream,
// runs the target through the ENGINE (any checkpoint it loads: Hugging Face,
// GGUF, quantized — the capture is the served target's) for the assistant's
// inputs (train/assistant_torch.h engine_capture: the post-norm hidden and
// the K/V of the layers it reads), and trains the assistant's first draft
// step in libtorch to draft the target's own next token (cross-entropy
// against the target's argmax at each position, every token scored by the
// full tied head). It starts from a gemma4_assistant directory
// (--init-from: Google's, to fine-tune it to a quantized target, or any
// other), whose config it keeps. The centroid head's clusters and
// token_ordering are kept from the initial weights, not learned: the trainer
// scores every token, so no gradient reaches them, and keeping them keeps the
// published layout's meaning (the engine still drafts with them).
// The output is a gemma4_assistant directory (fp32) every engine loads as
// Google's, and on request llama.cpp's GGUF of it (drafter/assistant_gguf.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mtp::train {

struct AssistantTrainOptions {
  std::string target;     // the served target (any format the engine loads)
  std::string init_from;  // a gemma4_assistant directory
  std::string tokens;     // a pretraining tokens file (io/pretrain_data.h): its train stream
  std::string out;        // the gemma4_assistant directory written
  std::string gguf;       // also llama.cpp's gemma4-assistant GGUF of it ("" = none)
  int steps = 100, seq_len = 64;
  double lr = 1e-4;
  uint64_t seed = 0;
};

struct AssistantTrainResult {
  std::vector<double> losses;  // per step
};

// InputError for options out of range, the loaders' errors for a target or
// assistant that does not load or fit.
AssistantTrainResult train_assistant(const AssistantTrainOptions& o);

}  // namespace mtp::train
