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
                  "Hugging Face Qwen3.5 directory whose mtp.* tensors start the training (often "
                  "the target itself); written again, with the new head, to --out")
      ->required();
  cmd->add_option("--tokens", o->tokens,
                  "Token stream: a pretraining tokens file (written by `mtpspec pretrain`)")
      ->required();
  cmd->add_option("-o,--out", o->out, "Directory to write (--init-from with the new mtp.*)")
      ->required()
      ->check(cli::OutputDir);
  cmd->add_option("--steps", o->steps, "Optimizer steps")->check(cli::Positive);
  cmd->add_option("--seq-len", o->seq_len, "Tokens per step (>= 3)")->check(cli::Positive);
  cmd->add_option("--lr", o->lr, "Adam learning rate");
  cmd->add_option("--seed", o->seed, "Seed of the windows drawn from the stream");
  cmd->add_option("--parity-windows", o->parity_windows,
                  "Held-out windows the parity gate compares")
      ->check(cli::Positive);
  cmd->callback([o] {
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
