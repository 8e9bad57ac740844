// `mtpspec train-assistant` (also `mtpspec train --drafter-arch
// gemma4-assistant --online`): Gemma 4's assistant trained from scratch or
// fine-tuned from --init-from against the exact target the engine serves
// (train/assistant_train.h). Runs in bin/mtpspec-train; `mtpspec` execs it
// (app/train_forward.h), first tokenizing --corpus/--prompts into online
// jobs (app/train_online.cc), which arrive here as --online-jobs.
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
  auto no_parity = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand(cli::kTrainAssistant.name, cli::kTrainAssistant.help);
  cmd->add_option("-m,--model", o->target, "The served target (any checkpoint the engine loads)")
      ->required();
  auto* init = cmd->add_option(
      "--init-from", o->init_from,
      "gemma4_assistant directory to start from (Google's, to fine-tune it); without it, an "
      "assistant of the --assistant-* shape is trained from scratch");
  cmd->add_option("--assistant-layers", o->shape.layers,
                  "From scratch: layers (the last full attention, the others sliding)")
      ->check(cli::Range(1, 64))->excludes(init);
  cmd->add_option("--assistant-hidden", o->shape.hidden,
                  "From scratch: width (0 = the target's d_model / 6, as Google's E2B assistant)")
      ->check(cli::NonNegative)->excludes(init);
  cmd->add_option("--assistant-heads", o->shape.heads,
                  "From scratch: query heads (0 = 4, rounded up to the target's kv heads)")
      ->check(cli::NonNegative)->excludes(init);
  cmd->add_option("--assistant-ffn", o->shape.ffn, "From scratch: MLP width (0 = 8 x width)")
      ->check(cli::NonNegative)->excludes(init);
  auto* tokens = cmd->add_option(
      "--tokens", o->tokens,
      "Token stream: a pretraining tokens file (written by `mtpspec pretrain`), cut into "
      "--seq-len windows");
  cmd->add_option(
      "--online-jobs", o->online_jobs,
      "Or the jobs file `mtpspec train-assistant --corpus` or `mtpspec train --online` wrote: "
      "its sequences (self-distilled ones continued by the target), in the order the "
      "K-module's trainer visits them with the same --seed and --batch")
      ->excludes(tokens);
  cmd->add_option("-o,--out,--output", o->out, "gemma4_assistant directory to write")->required();
  cmd->add_option("--gguf", o->gguf,
                  "Also write it as llama.cpp's gemma4-assistant GGUF here (full head)");
  cmd->add_option("--k", o->K, "Draft steps trained jointly (the state carried step to step)")
      ->check(cli::Range(1, 16));
  cmd->add_option("--loss-weights", o->loss_weights,
                  "Per-step loss weights, comma separated (missing ones continue x0.8)")
      ->delimiter(',');
  cmd->add_option("--steps", o->steps, "Optimizer steps")->check(cli::Positive);
  cmd->add_option("--seq-len", o->seq_len, "Tokens per window of --tokens (>= K + 2)")
      ->check(cli::Positive);
  cmd->add_option("--batch", o->batch, "Sequences per optimizer step")->check(cli::Positive);
  cmd->add_option("--threads", o->threads,
                  "Threads of libtorch and of the target's forward (default: physical cores)")
      ->check(cli::NonNegative);
  cmd->add_option("--lr", o->lr, "Adam learning rate");
  cmd->add_option("--seed", o->seed,
                  "Seed of scratch weights, of the windows drawn from --tokens, of the order of "
                  "--online-jobs and of their self-distillation (as `mtpspec train --seed`)")
      ->check(cli::kSeedRange);
  cmd->add_flag("--no-parity", *no_parity, "Skip the parity gate at the end");
  cmd->footer(
      "Training text: --tokens FILE, --online-jobs FILE, or (through `mtpspec`, which has the "
      "tokenizer) --corpus FILE... | --prompts FILE with the capture flags of `mtpspec "
      "precompute` (--seq-len, --max-tokens, --heldout, --self-distill, --prompt-tokens, "
      "--prompt-tokens-min, --gen-tokens, --temp): `mtpspec` tokenizes and cuts it as `mtpspec "
      "train --online` does, writes OUT/online/jobs.safetensors and runs this command with "
      "--online-jobs on it (--jobs-only: write the jobs and print the command). "
      "The output records the target's fingerprint and the capture point; `mtpspec generate "
      "--drafter DIR` refuses it for another target unless --drafter-target-mismatch warn. "
      "docs/TRAINING.md \"Gemma 4's assistant\".");
  cmd->callback([o, no_parity] {
    o->parity = !*no_parity;
    const train::AssistantTrainResult r = train::train_assistant(*o);
    const nlohmann::json j = {{"out", o->out}, {"losses", r.losses},
                              {"parity", r.parity_ran ? nlohmann::json(r.parity_passed)
                                                      : nlohmann::json("skipped")}};
    fmt::print("{}\n", j.dump());
  });
}

}  // namespace mtp::train_cli
