// `mtpspec generate`: stream a continuation of a prompt (docs/SEMANTICS.md).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/checks.h"
#include "app/commands.h"
#include "app/common.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "app/spec_common.h"
#include "speculative/generate.h"

namespace mtp::app {

namespace {

struct GenerateArgs {
  ModelArgs model;
  std::string prompt, prompt_file;
  int n = 128;
  SamplingArgs sampling;
  std::vector<std::string> stop;
  int ctx = 0;
  bool json = false, no_special = false;
  DrafterArgs spec;
  LookupArgs lookup;
};

void run_generate(GenerateArgs a) {
  std::string prompt = a.prompt;
  if (!a.prompt_file.empty()) prompt = read_file(a.prompt_file);
  if (!io::is_valid_utf8(prompt)) fail<InputError>("the prompt is not valid UTF-8");
  speculative::GenerateOptions o;
  o.sampler = sampler_options(a.sampling);
  Session s = open_session(a.model);
  std::unique_ptr<drafter::Drafter> dr;
  if (!a.spec.no_spec) dr = open_drafter(a.model, a.spec, *s.model);
  std::vector<int32_t> ids = s.tokenizer->encode(prompt, !a.no_special);
  speculative::SpecOptions so;
  so.drafter = dr.get();
  if (dr) so.draft_k = resolve_draft_k(a.spec, dr->config().K, "the drafter's K", dr->config().K);
  so.p_min = a.spec.p_min;
  so.mode = spec_sampling_mode(a.sampling);
  std::unique_ptr<speculative::HistoryStore> history;
  if (!a.spec.no_spec) {
    history = open_history(a.lookup, s.tokenizer.get());
    apply_lookup_args(a.lookup, history.get(), so);
  }
  o.n_new = a.n;
  o.stop = a.stop;
  o.ctx = a.ctx;
  auto print = [&](std::string_view t) {
    if (a.json) return;
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  };
  speculative::GenerateResult r =
      speculative::generate(*s.model, s.tokenizer.get(), ids, o, s.pool.get(), print, so);
  if (!r.notice.empty()) fmt::print(stderr, "notice: {}\n", r.notice);
  const auto& t = r.timings;
  if (a.json) {
    nlohmann::json j;
    j["text"] = r.text;
    j["token_ids"] = r.token_ids;
    j["prompt_ids"] = r.prompt_ids;
    j["finish_reason"] = r.finish_reason;
    j["timings"] = {{"prompt_tokens", t.n_prompt}, {"prompt_s", t.prompt_s},
                    {"prompt_tok_s", t.prompt_tok_s()}, {"generated_tokens", t.n_gen},
                    {"generation_s", t.gen_s}, {"generation_tok_s", t.gen_tok_s()},
                    {"threads", s.pool->size()}};
    j["sampling"] = sampling_json(a.sampling);
    if (r.stats) j["stats"] = r.stats->to_json();
    if (dr) j["drafter"] = dr->path();
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("\n");
  std::fflush(stdout);
  fmt::print(stderr, "[{} prompt tokens: {:.1f} tok/s | {} generated: {:.1f} tok/s | finish: {}]\n",
             t.n_prompt, t.prompt_tok_s(), t.n_gen, t.gen_tok_s(), r.finish_reason);
  if (r.stats) print_spec_stats(*r.stats);
}

}  // namespace

void add_generate(CLI::App& root) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = root.add_subcommand("generate", "Generate a continuation of a prompt");
  add_model_flags(cmd, a->model);
  auto* p = cmd->add_option("-p,--prompt", a->prompt, "Prompt text (raw, no chat template)");
  cmd->add_option("-f,--prompt-file", a->prompt_file, "Read the prompt from a file")
      ->excludes(p);
  cmd->add_option("-n,--n-predict", a->n, "Number of new tokens to generate")
      ->check(cli::NonNegative);
  add_sampling_flags(cmd, a->sampling);
  cmd->add_option("--stop", a->stop, "Stop string (repeatable): the text ends before it");
  cmd->add_option("--ctx", a->ctx,
                  "Context length: the KV cache holds this many positions (default: what this "
                  "generation needs, prompt + -n + drafts, capped by the model's maximum and "
                  "memory)");
  cmd->add_flag("--no-special", a->no_special, "Do not add BOS/EOS to the prompt");
  cmd->add_flag("--json", a->json, "Print one JSON object instead of streaming text");
  add_drafter_flags(cmd, a->spec, kAllDrafterFlags);
  add_lookup_flags(cmd, a->lookup);
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace mtp::app
