// `mtpspec train-native-head`: a Qwen3.5 checkpoint's native MTP head
// fine-tuned (from --init-from) against the exact target the engine serves
// (train/native_head_train.h). Runs in bin/mtpspec-train; `mtpspec
// train-native-head` execs it (app/train_forward.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/checks.h"
#include "cli/train_commands.h"
#include "core/error.h"
#include "train/native_head_train.h"
#include "train_cli/commands.h"

namespace mtp::train_cli {

void add_train_native_head(CLI::App& root) {
  auto o = std::make_shared<train::NativeHeadTrainOptions>();
  CLI::App* cmd = root.add_subcommand(cli::kTrainNativeHead.name, cli::kTrainNativeHead.help);
  cmd->add_option("-m,--model", o->target,
                  "The served target (any checkpoint the engine loads: HF, GGUF, quantized)")
      ->required();
  cmd->add_option("--init-from", o->init_from,
                  "Qwen3.5 checkpoint whose native head starts the training (a Hugging Face "
                  "directory or a GGUF file; default: --model); written again, in its own "
                  "format, with the new head, to --out");
  cmd->add_option("--tokens", o->tokens,
                  "Token stream: a pretraining tokens file (written by `mtpspec pretrain`)")
      ->required();
  cmd->add_option("-o,--out", o->out,
                  "Where to write the init checkpoint with the new head: a directory (Hugging "
                  "Face init: mtp.* replaced) or a GGUF file (GGUF init: blk.N.nextn.* and "
                  "the block's layer replaced, every other tensor as stored)")
      ->required();
  cmd->add_option("--steps", o->steps, "Optimizer steps")->check(cli::Positive);
  cmd->add_option("--seq-len", o->seq_len, "Tokens per step (>= 3)")->check(cli::Positive);
  cmd->add_option("--lr", o->lr, "Adam learning rate");
  cmd->add_option("--seed", o->seed, "Seed of the windows drawn from the stream");
  cmd->add_option("--parity-windows", o->parity_windows,
                  "Held-out windows the parity gate compares")
      ->check(cli::Positive);
  cmd->callback([o] {
    // The output's kind follows the init checkpoint's format.
    const std::string& init = train::native_head_init(*o);
    const bool gguf = train::native_head_writes_gguf(*o);
    std::string out = o->out;
    if (std::string why = (gguf ? cli::OutputFile : cli::OutputDir)(out); !why.empty()) {
      fail<InputError>("--out: {} (a {} for a {} --init-from)", why, gguf ? "file" : "directory",
                       gguf ? "GGUF" : "Hugging Face");
    }
    cli::refuse_output_over_inputs("--out", o->out, !gguf,
                                   {{"--model", &o->target}, {"--init-from", &init},
                                    {"--tokens", &o->tokens}});
    const train::NativeHeadTrainResult r = train::train_native_head(*o);
    const nlohmann::json j = {{"out", o->out},
                              {"losses", r.losses},
                              {"parity", {{"rows", r.parity_rows},
                                          {"decided", r.parity_decided},
                                          {"agreed", r.parity_agreed},
                                          {"max_dlogit", r.parity_max_dlogit},
                                          {"tolerance", r.parity_tol},
                                          {"passed", r.parity_passed}}}};
    fmt::print("{}\n", j.dump());
  });
}

}  // namespace mtp::train_cli
