// `mtpspec train`: train the MTP drafter on precomputed shards (libtorch; see
// train/trainer.h). Runs in bin/mtpspec-train;
// `mtpspec train` execs it (app/train_forward.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>
#include <new>

#include "cli/checks.h"
#include "cli/train_commands.h"
#include "train_cli/commands.h"
#include "core/error.h"
#include "train/trainer.h"
#include "train_cli/local_ranks.h"

namespace mtp::train_cli {

void add_train(CLI::App& root) {
  auto o = std::make_shared<train::TrainOptions>();
  auto no_parity = std::make_shared<bool>(false);
  auto nproc = std::make_shared<int>(0);
  CLI::App* cmd = root.add_subcommand(
      cli::kTrain.name, cli::kTrain.help);
  auto arch = std::make_shared<std::string>("mtp");
  cmd->add_option("--drafter-arch", *arch,
                  "mtp: the K-module MTP drafter (the flags below); gemma4-assistant: Gemma 4's "
                  "assistant, online only (`mtpspec train --drafter-arch gemma4-assistant "
                  "--online -m MODEL (--corpus TEXT | --tokens FILE) -o DIR [--init-from DIR] "
                  "[--k K]`: the flags of `mtpspec train-assistant --help`)")
      ->check(CLI::IsMember({"mtp", "gemma4-assistant"}));
  auto* shards = cmd->add_option("--shards", o->shards_dir,
                                 "Shards folder written by `mtpspec precompute`");
  cmd->add_option("--online-jobs", o->online_jobs,
                  "Online training: the jobs file `mtpspec train --online` wrote (the target "
                  "computes each batch's capture as training runs; no shards)")
      ->excludes(shards);
  cmd->add_option("--hidden-dtype", o->hidden_dtype,
                  "Online: the type the capture is rounded to (as a shard would store it)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("--target-forward", o->target_forward,
                  "Online: the target's forward: engine (CPU, the inference bits), torch (its "
                  "libtorch twin on --device), auto (engine on cpu, torch on cuda)")
      ->check(CLI::IsMember({"auto", "engine", "torch"}))
      ->capture_default_str();
  cmd->add_flag("--force", o->force,
                "Run even when the budget says the memory does not fit, or a libtorch target's "
                "capture gap exceeds its bound");
  cmd->add_option("-m,--model", o->model_path,
                  "Target model the shards were computed with (HF directory or llama2.c .bin)")
      ->required();
  cmd->add_option("-o,--output", o->run_dir,
                  "Run folder: checkpoint.safetensors, metrics.jsonl, run.json")
      ->required()
      ->check(cli::OutputDir);
  cmd->add_option("--k", o->K, "Number of MTP modules K")->check(cli::Range(1, 16));
  auto* steps = cmd->add_option("--steps", o->steps, "Optimizer steps (default: --epochs 1)")
                    ->check(cli::Positive);
  cmd->add_option("--epochs", o->epochs, "Passes over the training split (when --steps is not given)")
      ->check(cli::Positive)
      ->excludes(steps);
  cmd->add_option("--batch", o->batch, "Sequences per micro-batch (per rank)")
      ->check(cli::Positive);
  cmd->add_option("--accum", o->accum, "Micro-batches accumulated per step (per rank)")
      ->check(cli::Positive);
  cmd->add_option("--lr", o->lr, "Peak learning rate (AdamW)")
      ->check(cli::Positive);
  cmd->add_option("--min-lr-ratio", o->min_lr_ratio, "Cosine schedule floor, as a fraction of --lr")
      ->check(cli::Range(0, 1));
  cmd->add_option("--warmup", o->warmup, "Linear warm-up steps (default min(100, steps/10))")
      ->check(cli::Range(-1, HUGE_VAL));
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW decoupled weight decay (matrices only)")
      ->check(cli::NonNegative);
  cmd->add_option("--clip", o->clip, "Gradient-norm clipping threshold (0 = off)")
      ->check(cli::NonNegative);
  cmd->add_option("--loss-weights", o->loss_weights,
                  "Per-module loss weights, comma separated (missing ones continue x0.8)")
      ->delimiter(',');
  cmd->add_option("--loss", o->loss,
                  "Per-module loss: ce (labels), kl (KL(target || module) at --kl-temp from the "
                  "shards' capture: the whole distribution, for sampling at T > 0), ce+kl")
      ->check(CLI::IsMember({"ce", "kl", "ce+kl"}))
      ->capture_default_str();
  cmd->add_option("--kl-temp", o->kl_temp, "Temperature of the KL loss (> 0)")->capture_default_str();
  cmd->add_option("--ema", o->ema, "EMA decay of the weights (0 = off)")
      ->check(cli::Range(0, 1));
  cmd->add_option("--threads", o->threads, "libtorch threads (default: physical cores)")
      ->check(cli::NonNegative);
  cmd->add_option("--device", o->device, "Training device (cuda needs a CUDA build of libtorch)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_flag("--resume", o->resume,
                "Continue the checkpoint in the run folder, bit for bit (same flags and thread "
                "count; data-parallel ranks must all see rank 0's run folder)");
  cmd->add_option("--eval-every", o->eval_every, "Held-out evaluation period in steps (default steps/10)")
      ->check(cli::NonNegative);
  cmd->add_option("--eval-sequences", o->eval_sequences, "Held-out sequences per evaluation (0 = all)")
      ->check(cli::NonNegative);
  cmd->add_option("--save-every", o->save_every, "Checkpoint period in steps (default: --eval-every)")
      ->check(cli::NonNegative);
  cmd->add_option("--seed", o->seed, "Seed of the initial weights and the data order")
      ->check(cli::kSeedRange);
  cmd->add_option("--window", o->window,
                  "Module attention window (default: the shards' seq-len; 0 = unlimited)")
      ->check(cli::NonNegative);
  cmd->add_option("--world-size", o->world_size, "Data-parallel processes (default $WORLD_SIZE or 1)")
      ->check(cli::NonNegative);
  cmd->add_option("--rank", o->rank, "This process's rank (default $RANK or 0)")
      ->check(cli::Range(-1, 1e6));
  cmd->add_option("--dist-file", o->dist_file,
                  "Rendezvous file (c10d FileStore; a fresh path every rank can see)");
  cmd->add_option("--master-addr", o->master_addr, "TCP rendezvous host (default $MASTER_ADDR)");
  cmd->add_option("--master-port", o->master_port, "TCP rendezvous port (default $MASTER_PORT or 29500)")
      ->check(cli::Range(0, 65535));
  cmd->add_option("--dist-timeout", o->dist_timeout_s, "Rendezvous/collective timeout, seconds")
      ->check(cli::Positive);
  cmd->add_option("--nproc", *nproc,
                  "Start this many data-parallel ranks on this machine (processes; c10d Gloo, "
                  "or NCCL with --device cuda, one GPU per rank; a FileStore in the run "
                  "folder): the same weights as one process with --accum x N")
      ->check(cli::Range(1, 256))
      ->excludes("--rank")
      ->excludes("--world-size")
      ->excludes("--dist-file");
  cmd->add_option("--stop-after", o->stop_after,
                  "Stop (checkpointed) after this step; continue later with --resume")
      ->check(cli::NonNegative);
  cmd->add_flag("--no-parity", *no_parity, "Skip the parity gate at the end");
  cmd->add_flag("!--no-progress", o->progress, "No progress line or summary");
  cmd->footer(
      "Online training: `mtpspec train --online -m MODEL -o RUN (--corpus FILE... | --prompts "
      "FILE) [flags]` tokenizes the corpus and cuts it into sequences as `mtpspec precompute` "
      "does (its flags --tokenizer, --seq-len, --max-tokens, --heldout, --self-distill, "
      "--prompt-tokens, --prompt-tokens-min, --gen-tokens, --temp), writes "
      "RUN/online/jobs.safetensors and runs this command with --online-jobs on it and the other "
      "flags; self-distillation samples with --seed. With --jobs-only it writes the jobs and "
      "prints this command instead (to train on another machine, e.g. a CUDA build: "
      "docs/TRAINING.md).");
  cmd->callback([o, no_parity, nproc, cmd, arch] {
    if (*arch != "mtp") {
      fail<InputError>("the assistant is trained by `mtpspec train --drafter-arch {} --online` "
                       "(or `mtpspec-train {}`), which take its own flags", *arch,
                       cli::kTrainAssistant.name);
    }
    if (*nproc > 1) {
      const int st = run_local_ranks(*nproc, own_arguments(), o->run_dir, 30);
      if (st != 0) fail<IoError>("data-parallel training on {} local ranks failed (status {})",
                                 *nproc, st);
      return;
    }
    o->parity = !*no_parity;
    std::string line = "mtpspec train";
    for (const auto& r : cmd->get_options()) {
      for (const auto& v : r->results()) line += " " + r->get_name() + " " + v;
    }
    o->command_line = line;
    train::TrainReport r;
    try {
      r = train::run_training(*o);
    } catch (const std::bad_alloc&) {  // a batch that does not fit (--batch 100000: exit 4 before)
      fail<InputError>("out of memory training micro-batches of --batch {} sequences: lower --batch "
                       "(and raise --accum to keep the sequences per step)", o->batch);
    }
    if (r.final_step > 0 && !r.last_eval.is_null() && r.last_eval.contains("raw")) {
      const auto& e = r.last_eval["raw"];
      fmt::print("held-out (raw weights): acc {} joint {} E[tokens/cycle] {:.3f}\n",
                 e["acc"].dump(), e["joint"].dump(), e["E"].get<double>());
      if (r.last_eval.contains("ema")) {
        const auto& m = r.last_eval["ema"];
        fmt::print("held-out (EMA weights): acc {} joint {} E[tokens/cycle] {:.3f}\n",
                   m["acc"].dump(), m["joint"].dump(), m["E"].get<double>());
      }
    }
  });
}

}  // namespace mtp::train_cli
