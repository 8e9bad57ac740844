#include "cli/checks.h"
#include "app/args.h"

#include "speculative/scheduler/params.h"
#include "speculative/sources/draft_source.h"

#include <CLI/CLI.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"

namespace mtp::app {

void add_model_flags(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("-m,--model", a.model,
                  "Target model: a Hugging Face directory (config.json + *.safetensors), a GGUF "
                  "file (llama, qwen2, qwen3, gemma2, gemma3) or a llama2.c .bin checkpoint")
      ->required();
  cmd->add_option("--tokenizer", a.tokenizer,
                  "Tokenizer file or directory (default: the one beside the model; a GGUF "
                  "model's own tokenizer.ggml.* metadata)");
  cmd->add_option("--weights", a.weights,
                  "Precision the weight matrices are held in: auto (each as stored: bf16, fp16 "
                  "and fp32 tensors in their own type, GGUF block types as they are; computes "
                  "exactly what fp32 computes), fp32, bf16 or fp16 (round other weights), or "
                  "requantized at load with mtpspec's quantizer to a ggml block type q8_0, q4_0, "
                  "q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (docs/FORMATS.md)")
      ->check(CLI::IsMember(kWeightTypeNames))
      ->capture_default_str();
  add_tied_head_flag(cmd, a.tied_head);
  cmd->add_option("--threads", a.threads, "Worker threads (default: physical cores)")
      ->check(cli::NonNegative);
}

void add_tied_head_flag(CLI::App* cmd, std::string& mode) {
  cmd->add_option("--tied-head", mode,
                  "How a tied head reads the token table: auto (the default: a float table "
                  "the weights hold as stored or as fp32 is read in place from the memory map, "
                  "no copy; a hold that changes its values, e.g. --weights q4_k over bf16, and "
                  "GGUF block types get a packed copy), packed (always a copy in the kernels' "
                  "layout, the table's bytes held twice: the in-place head takes ~13 % longer "
                  "on 1 thread, as long on 2), "
                  "mapped (in place, refusing a hold that changes the values; GGUF block types "
                  "stay packed) or mapped-blocks (block types in place too, computed by the "
                  "much slower reference). Every logit has the same bits either way")
      ->check(CLI::IsMember({"auto", "packed", "mapped", "mapped-blocks"}))
      ->capture_default_str();
}

void add_capture_flags(CLI::App* cmd, speculative::PrecomputeOptions& o) {
  cmd->add_option("--corpus", o.corpus,
                  "Corpus files: plain text (documents separated by blank lines) or .jsonl with "
                  "a \"text\" field (repeatable)");
  cmd->add_option("--prompts", o.prompts,
                  "Instead of a corpus: a prompts file (JSON Lines, \"prompt\" field) whose "
                  "whole prompts the target continues (self-distillation)")
      ->excludes("--corpus");
  cmd->add_option("--seq-len", o.seq_len, "Tokens per sequence (0 = min(512, the model's context))")
      ->check(cli::NonNegative);
  cmd->add_option("--max-tokens", o.max_tokens,
                  "Stop after this many tokens (0 = all); with --self-distill, prompt + generation "
                  "budget per sequence (a generation may end earlier at a stop token)")
      ->check(cli::NonNegative);
  cmd->add_option("--heldout", o.heldout, "Fraction of documents held out for evaluation")
      ->check(cli::Range(0, 1));
  CLI::Option* sd = cmd->add_flag(
      "--self-distill", o.self_distill,
      "Let the target continue prompts taken from the corpus and train on its own text");
  // The self-distillation settings need --self-distill: without it they would
  // be accepted and do nothing (a corpus run, not what was asked for).
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "Self-distillation: prompt length")
      ->needs(sd);
  cmd->add_option("--prompt-tokens-min", o.prompt_tokens_min,
                  "Self-distillation: vary the prompt length per document between this and "
                  "--prompt-tokens (0 = fixed), so the drafter also sees short prompts")
      ->needs(sd);
  cmd->add_option("--gen-tokens", o.gen_tokens,
                  "Self-distillation: tokens to generate per prompt (0 = fill the sequence)")
      ->needs(sd);
  cmd->add_option("--temp", o.temp,
                  "Self-distillation: sampling temperature (0 = greedy, the default decoding; "
                  "use the temperature the drafter will be used at)")
      ->capture_default_str()
      ->needs(sd);
}

void add_drafter_flags(CLI::App* cmd, DrafterArgs& a, unsigned which,
                       const std::string& drafter_help, const std::string& draft_k_help) {
  if (which & kFlagDrafter) {
    cmd->add_option("--drafter", a.drafter,
                    drafter_help.empty()
                        ? "MTP drafter file (default: drafter.safetensors beside the model, if "
                          "present), or Gemma 4's assistant: a gemma4_assistant directory or "
                          "llama.cpp's gemma4-assistant GGUF"
                        : drafter_help);
    cmd->add_option_function<std::string>(
           "--drafter-target-mismatch",
           [&a](const std::string& s) {
             a.target_mismatch =
                 s == "warn" ? drafter::TargetMismatch::Warn : drafter::TargetMismatch::Refuse;
           },
           "A drafter trained for another target fingerprint (e.g. the bf16 checkpoint of this "
           "GGUF or quantized copy): refuse (default) or warn and run it (output unchanged, "
           "acceptance may be lower)")
        ->check(CLI::IsMember({"refuse", "warn"}));
  }
  if (which & kFlagDraftK) {
    // Range-checked by resolve_draft_k, which knows the drafter's K.
    cmd->add_option("--draft-k", a.draft_k,
                    draft_k_help.empty() ? "Drafts per cycle, 1..K (default: the drafter's K)"
                                         : draft_k_help)
        ->each([&a](const std::string&) { a.draft_k_given = true; });
  }
  if (which & kFlagDraftPMin) {
    cmd->add_option("--draft-p-min", a.p_min,
                    "Stop drafting at a module whose top probability is below this, in [0, 1] "
                    "(0 = never; with a draft vocabulary, the probability among its tokens)")
        ->capture_default_str()
        ->check(cli::Range(0, 1));  // named the flag twice, and read "0.5abc" as 0.5
  }
  if (which & kFlagTree) {
    auto* tree = cmd->add_option("--tree", a.tree,
                                 "Draft trees instead of chains: W1,W2,... children per node at "
                                 "each depth (e.g. 3,2,1; at most 63 nodes), or 'auto' (the shape "
                                 "of most expected tokens per second, from the measured m(q) and "
                                 "live acceptance by depth and rank). --draft-k caps the depth")
                     ->check(cli::NonEmpty);
    cmd->add_option("--tree-budget", a.tree_budget,
                    "Dynamic draft trees of at most N nodes (1..63): the most probable "
                    "continuations by cumulative draft probability (EAGLE-2 style)")
        ->check(cli::Positive)
        ->excludes(tree);
  }
  if (which & kFlagNoSpec) {
    cmd->add_flag("--no-spec", a.no_spec, "Do not speculate, even if a drafter is present");
  }
}

speculative::TreeOptions resolve_tree(const DrafterArgs& a, int drafter_k) {
  if (a.tree_budget > 0) return speculative::TreeOptions::with_budget(a.tree_budget);
  if (a.tree.empty()) return {};
  speculative::TreeOptions t = speculative::TreeOptions::parse(a.tree);
  if (t.kind == speculative::TreeOptions::Kind::Static && int(t.widths.size()) > drafter_k) {
    fail<InputError>("--tree {} is {} deep; the drafter drafts {} deep at most (an MTP "
                     "drafter: K modules, one per depth)", a.tree, t.widths.size(), drafter_k);
  }
  return t;
}

int resolve_draft_k(const DrafterArgs& a, int k_max, const std::string& k_max_what,
                    int k_default) {
  if (!a.draft_k_given) return k_default;
  // The library's rule (speculative::resolve_draft_k; 0 there means "the
  // longest"), the flag named.
  try {
    if (a.draft_k >= 1) return speculative::resolve_draft_k(a.draft_k, k_max, k_max_what.c_str());
  } catch (const InputError&) {
  }
  fail<InputError>("--draft-k {} is outside 1..{} ({})", a.draft_k, k_max, k_max_what);
}

bool LookupArgs::has(const std::string& s) const {
  return std::find(lookup.begin(), lookup.end(), s) != lookup.end();
}

void add_lookup_flags(CLI::App* cmd, LookupArgs& a) {
  std::string names;
  for (const auto& [name, help] : speculative::draft_sources()) {
    names += fmt::format("\n  {}: {}", name, help);
  }
  cmd->add_option("--draft-source", a.sources,
                  "Draft sources by name, comma separated (default: mtp when a drafter is "
                  "given; --lookup adds its sources). Registered:" + names)
      ->delimiter(',')
      ->check([](const std::string& v) {
        return speculative::draft_source_name(v) ? std::string()
                                                 : fmt::format("no draft source is named '{}'", v);
      });
  cmd->add_option("--lookup", a.lookup,
                  "Lookup draft sources beside (or without) the drafter, comma separated: prompt "
                  "(continuations of earlier occurrences in the prompt and output), history "
                  "(the most frequent continuation in earlier outputs and --lookup-corpus)")
      ->delimiter(',')
      ->check(CLI::IsMember({"prompt", "history"}));
  cmd->add_option("--lookup-ngram-max", a.ngram_max,
                  "Longest suffix (tokens) the lookups match, tried longest first")
      ->check(cli::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--lookup-max-draft", a.max_draft, "Longest chain a lookup proposes")
      ->check(cli::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--lookup-corpus", a.corpus,
                  "Text (or .jsonl) the history source uses as its datastore");
  cmd->add_option("--history-mb", a.history_mb,
                  "Memory bound of the history datastore, MiB (oldest documents evicted first)")
      ->check(cli::Range(1.0 / 1024, 1 << 20))  // 1 KiB .. 1 TiB: a byte count, never 0 or overflowing
      ->capture_default_str();
  cmd->add_flag("--no-gate", a.no_gate,
                "Verify the best proposal at full length every cycle, even below break-even "
                "(default: the budget sizes drafts by measured gain per second, skips those "
                "that do not pay and re-probes them periodically)");
}

void add_sampling_flags(CLI::App* cmd, SamplingArgs& a, bool with_mode) {
  cmd->add_option("--temp", a.temp, "Sampling temperature, >= 0 (0 = greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", a.top_k, "Keep the k most probable tokens (0 = off)")
      ->capture_default_str();
  cmd->add_option("--top-p", a.top_p,
                  "Keep the smallest set of the most probable tokens with mass >= p, in (0, 1] "
                  "(1 = off)")
      ->capture_default_str();
  cmd->add_option("--min-p", a.min_p,
                  "Drop tokens below min-p x the largest probability, in [0, 1) (0 = off)")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "Sampling seed, >= 0; -1 = a random seed (printed)")
      ->check(cli::Seed(true))
      ->capture_default_str();
  if (!with_mode) return;
  cmd->add_option("--spec-sampling", a.spec_sampling,
                  "Speculation at temperature > 0: coupled (the same tokens as plain sampling "
                  "for the seed) or rejection (min(1, p/q): the same distribution, another "
                  "sample)")
      ->check(CLI::IsMember({"coupled", "rejection"}))
      ->capture_default_str();
}

speculative::SamplerOptions sampler_options(SamplingArgs& a) {
  if (a.seed < -1) fail<InputError>("--seed must be >= 0, or -1 for a random seed; got {}", a.seed);
  if (a.seed == -1) {
    a.seed = int64_t(std::random_device{}() & 0x7fffffffu);
    fmt::print(stderr, "[seed {} (--seed -1); rerun with --seed {} to repeat]\n", a.seed, a.seed);
  }
  speculative::SamplerOptions o;
  o.temperature = a.temp;
  o.top_k = a.top_k;
  o.top_p = a.top_p;
  o.min_p = a.min_p;
  o.seed = uint64_t(a.seed);
  o.validate();
  return o;
}

speculative::SpecSampling spec_sampling_mode(const SamplingArgs& a) {
  if (a.spec_sampling == "coupled") return speculative::SpecSampling::Coupled;
  if (a.spec_sampling == "rejection") return speculative::SpecSampling::Rejection;
  fail<InputError>("--spec-sampling must be coupled or rejection, got '{}'", a.spec_sampling);
}

nlohmann::json sampling_json(const SamplingArgs& a) {
  return {{"temperature", a.temp}, {"top_k", a.top_k},   {"top_p", a.top_p},
          {"min_p", a.min_p},      {"seed", a.seed},     {"spec_sampling", a.spec_sampling}};
}

}  // namespace mtp::app
