// `mtpspec train|export|parity` in the main binary: forwarders to the sibling
// executable bin/mtpspec-train, which holds the libtorch part.
//
// Why two binaries: libtorch loads libprotobuf.so.32 and Debian's
// libsentencepiece exports its own bundled protobuf-lite; a process with both
// crashes during static initialisation. The training subcommands need no
// tokenizer, so they live in mtpspec-train and the main binary execs it with
// the same arguments (exit status and output are the child's).
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mtp::app {

// Registers each of cli/train_commands.h's user commands (train, export,
// parity) on root as a pass-through: every argument after it (incl. --help)
// goes unparsed to `mtpspec-train name ...`. Without the sibling binary (a
// build without libtorch) the callback fails with a clear message.
// (Declared in commands.h: add_train_forwarders.)

// ConfigError naming `what` when this build has no mtpspec-train (no libtorch).
void require_train_binary(const std::string& what);
// Replaces this process with `mtpspec-train name args...` (OMP_WAIT_POLICY
// passive unless set). Fails like require_train_binary, or IoError.
[[noreturn]] void exec_train(const std::string& name, const std::vector<std::string>& args);

// `train --online` and `train-assistant --corpus|--prompts`
// (app/train_online.cc): whether args ask for it, and the arguments for
// `mtpspec-train train` (or `train-assistant`) once the capture jobs are
// written (tokenized here, where the tokenizer is, into OUT/online/; the
// capture flags are app/args.h add_capture_flags'; --online-jobs PATH
// replaces the corpus and capture flags). --help is passed on unchanged.
// --jobs-only: the jobs are written and the training command printed;
// returns {}.
bool wants_online(const std::vector<std::string>& args);
bool wants_corpus(const std::vector<std::string>& args);
enum class OnlineTrainer { KModule, Assistant };

// `train --drafter-arch gemma4-assistant --online ...`: true, and args made
// `train-assistant`'s (both flags removed; the assistant's trainer is online
// by nature: train/assistant_train.h). Without --online: InputError saying
// why shards cannot train it. Another (or no) --drafter-arch: false, args
// unchanged (the K-module trainer's; its own --drafter-arch mtp).
bool assistant_training(std::vector<std::string>& args);
std::vector<std::string> prepare_online_training(const std::vector<std::string>& args,
                                                 OnlineTrainer trainer = OnlineTrainer::KModule);

}  // namespace mtp::app
