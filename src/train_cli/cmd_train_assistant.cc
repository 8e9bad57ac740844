// `mtpspec train-assistant`: Gemma 4's assistant trained (fine-tuned from
// --init-from) against the exact target the engine serves
// (train/assistant_train.h). Runs in bin/mtpspec-train; `mtpspec
// train-assistant` execs it (app/train_forward.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/checks.h"
#include "cli/train_commands.h"
#include "train/assistant_train.h"
#include "train_cli/commands.h"

namespace mtp::train_cli {

void add_train_assistant(CLI::App& root) {
  auto o = std::make_shared<train::AssistantTrainOptions>();
  CLI::App* cmd = root.add_subcommand(cli::kTrainAssistant.name, cli::kTrainAssistant.help);
  cmd->add_option("-m,--model", o->target, "The served target (any checkpoint the engine loads)")
      ->required();
  cmd->add_option("--init-from", o->init_from,
                  "gemma4_assistant directory to start from (Google's, to fine-tune it)")
      ->required();
  cmd->add_option("--tokens", o->tokens,
                  "Token stream: a pretraining tokens file (written by `mtpspec pretrain`)")
      ->required();
  cmd->add_option("-o,--out", o->out, "gemma4_assistant directory to write")->required();
  cmd->add_option("--gguf", o->gguf,
                  "Also write it as llama.cpp's gemma4-assistant GGUF here (full head)");
  cmd->add_option("--steps", o->steps, "Optimizer steps")->check(cli::Positive);
  cmd->add_option("--seq-len", o->seq_len, "Tokens per step (>= 3)")->check(cli::Positive);
  cmd->add_option("--lr", o->lr, "Adam learning rate");
  cmd->add_option("--seed", o->seed, "Seed of the windows drawn from the stream");
  cmd->callback([o] {
    const train::AssistantTrainResult r = train::train_assistant(*o);
    const nlohmann::json j = {{"out", o->out}, {"losses", r.losses}};
    fmt::print("{}\n", j.dump());
  });
}

}  // namespace mtp::train_cli
