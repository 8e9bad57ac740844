// `mtpspec generate`: stream a continuation of a prompt (docs/SEMANTICS.md).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/checks.h"
#include "app/commands.h"
#include "app/common.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "app/spec_common.h"
#include "io/prompts.h"
#include "speculative/scheduler/generate.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/scheduler/trace.h"

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
  std::string prompts;  // --prompts FILE.jsonl: every prompt through the engine
  int parallel = 4;
  std::string trace;    // --trace FILE
};

// --trace FILE into the engine's options.
void add_trace(const std::string& path, speculative::SchedulerOptions& so) {
  if (path.empty()) return;
  so.trace = speculative::trace_to(std::make_shared<speculative::TraceFile>(path));
}

// The recurrent layers' memory per sequence (Qwen3.5), where the engine's
// memory is printed: stderr, and --json's "memory".
void print_state_memory(const speculative::Scheduler& sched) {
  if (const size_t rec = sched.recurrent_bytes_per_seq(); rec > 0) {
    fmt::print(stderr, "[recurrent state: {:.1f} MiB per sequence (state, its snapshot, the "
               "conv and gate ring), in the KV memory]\n", double(rec) / (1 << 20));
  }
}

nlohmann::json memory_json(const speculative::Scheduler& sched) {
  return {{"ctx", sched.ctx()}, {"kv_bytes", sched.kv_bytes()},
          {"recurrent_state_bytes_per_seq", sched.recurrent_bytes_per_seq()}};
}

// --prompts: every prompt of the set through the scheduler, --parallel at a
// time; one JSON line (--json) or one text block per prompt as it finishes.
void run_generate_batch(GenerateArgs& a) {
  check_speculation_flags(a.spec, a.sampling);
  const std::vector<io::PromptEntry> prompts = io::read_prompts(a.prompts);
  speculative::SamplerOptions sampler = sampler_options(a.sampling);
  Session s = open_session(a.model);
  std::unique_ptr<drafter::Drafter> dr;
  std::shared_ptr<const drafter::Gemma4Assistant> as;
  if (!a.spec.no_spec) dr = open_drafter(a.model, a.spec, *s.model);
  if (!a.spec.no_spec) as = open_assistant(a.model, a.spec, *s.model);
  speculative::SchedulerOptions so =
      engine_options(a.spec, a.lookup, dr.get(), s.tokenizer.get(), a.parallel, a.ctx, as);
  add_trace(a.trace, so);
  if (!a.json) fmt::print(stderr, "measuring the forward cost curve...\n");
  std::unique_ptr<speculative::Scheduler> engine = make_engine(
      s, dr.get(), so, fmt::format("--parallel {} --ctx {}", a.parallel, a.ctx));
  speculative::Scheduler& sched = *engine;
  fmt::print(stderr, "[scheduler: {} slots x {} positions, KV memory {:.1f} MiB{}]\n",
             sched.parallel(), sched.ctx(), double(sched.kv_bytes()) / (1 << 20),
             dr ? " (target + drafter)" : "");
  if (as) print_assistant(*as);
  print_state_memory(sched);
  // The cost curve at its timed points: as timed at start, or as followed live.
  auto print_curve = [&](const char* what, bool live) {
    std::string curve;
    for (const auto& [q, t] : sched.cost_curve().points()) {
      curve += fmt::format("{}{}: {:.3g}", curve.empty() ? "" : ", ", q,
                           (live ? sched.cost_curve()(q) : t) * 1e3);
    }
    fmt::print(stderr, "[forward cost m(q){}, ms: {}]\n", what, curve);
  };
  if (sched.speculates() && so.adaptive) print_curve("", false);
  std::vector<uint64_t> ids;
  const PromptBound bound = prompt_bound(s, a.ctx);
  for (const io::PromptEntry& p : prompts) {
    speculative::Request r;
    r.prompt = encode_prompt(s, p.prompt, !a.no_special, bound,
                             fmt::format("--prompts '{}' prompt {}", a.prompts, p.label(ids.size() + 1)));
    r.n_new = a.n;
    r.sampler = sampler;
    r.stop = a.stop;
    apply_request_flags(a.spec, a.sampling, dr.get(), r, as.get());
    try {
      ids.push_back(sched.submit(std::move(r)));
    } catch (const InputError& e) {  // a refused prompt is named: which one of the file
      fail<InputError>("--prompts '{}', prompt {} of {}: {}", a.prompts,
                       prompts[ids.size()].label(ids.size() + 1), prompts.size(), e.what());
    }
  }
  long total = 0;
  double per_seq = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto print = [&](const speculative::SequenceResult& r) {
    const size_t idx = size_t(std::find(ids.begin(), ids.end(), r.id) - ids.begin());
    const auto& t = r.timings;
    total += t.n_gen;
    per_seq += t.gen_tok_s();
    if (!a.json) {
      fmt::print("--- prompt {} ({}) ---\n{}{}\n", prompts[idx].label(idx), r.finish_reason,
                 prompts[idx].prompt, r.text);
      return;
    }
    nlohmann::json j;
    j["id"] = prompts[idx].id_or(idx);  // the JSONL's "id" when it has one
    j["text"] = r.text;
    j["token_ids"] = r.token_ids;
    j["prompt_ids"] = r.prompt_ids;
    j["finish_reason"] = r.finish_reason;
    j["stats"] = {{"prompt_tokens", t.n_prompt}, {"generated_tokens", t.n_gen},
                  {"queue_s", r.queue_s}, {"prompt_s", t.prompt_s}, {"generation_s", t.gen_s},
                  {"generation_tok_s", t.gen_tok_s()}};
    if (r.stats) j["stats"]["speculation"] = r.stats->to_json();
    fmt::print("{}\n", j.dump());
    std::fflush(stdout);
  };
  while (sched.step() || !sched.idle()) {
    for (const speculative::Event& e : sched.take_events()) {
      if (e.kind == speculative::Event::Kind::Finish) print(*e.result);
    }
  }
  for (const speculative::Event& e : sched.take_events()) {
    if (e.kind == speculative::Event::Kind::Finish) print(*e.result);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sched.speculates() && so.adaptive) print_curve(" followed live", true);
  fmt::print(stderr,
             "[{} prompts, --parallel {} | {} tokens in {:.2f} s: {:.1f} tok/s total, {:.1f} tok/s "
             "per sequence | {} forwards, {:.1f} rows each, {:.2f} s | drafter {:.2f} s]\n",
             prompts.size(), sched.parallel(), total, wall, wall > 0 ? total / wall : 0.0,
             prompts.empty() ? 0.0 : per_seq / double(prompts.size()), sched.forwards(),
             sched.forwards() ? double(sched.forward_rows()) / double(sched.forwards()) : 0.0,
             sched.forward_seconds(), sched.draft_seconds());
}

void run_generate(GenerateArgs a) {
  refuse_lookups_without_spec(a.spec, a.lookup);
  check_speculation_flags(a.spec, a.sampling);
  if (!a.prompts.empty()) return run_generate_batch(a);
  speculative::GenerateOptions o;
  o.sampler = sampler_options(a.sampling);
  Session s = open_session(a.model);
  const PromptBound bound = prompt_bound(s, a.ctx);
  const std::string prompt =
      a.prompt_file.empty() ? a.prompt : read_prompt_file(a.prompt_file, bound);
  if (!io::is_valid_utf8(prompt)) fail<InputError>("the prompt is not valid UTF-8");
  std::unique_ptr<drafter::Drafter> dr;
  std::shared_ptr<const drafter::Gemma4Assistant> as;
  if (!a.spec.no_spec) dr = open_drafter(a.model, a.spec, *s.model);
  if (!a.spec.no_spec) as = open_assistant(a.model, a.spec, *s.model);
  std::vector<int32_t> ids = encode_prompt(s, prompt, !a.no_special, bound, "the prompt");
  // The engine with one slot: what this generation needs (prompt + -n +
  // the longest draft), or --ctx.
  speculative::SchedulerOptions so =
      engine_options(a.spec, a.lookup, dr.get(), s.tokenizer.get(), 1, 0, as);
  add_trace(a.trace, so);
  const int longest = std::max({dr ? dr->config().K : 0, as ? so.draft_k : 0,
                                so.sources.empty() ? 0 : a.lookup.max_draft, 1});
  so.ctx = speculative::resolve_ctx(s.model->config(), a.ctx,
                                    int64_t(ids.size()) + a.n + longest + 1);
  if (int(ids.size()) >= so.ctx) {
    fail<InputError>("the prompt is {} tokens; the context is {} ({}), which leaves no room to "
                     "generate", ids.size(), so.ctx,
                     a.ctx > 0 ? "--ctx" : "the model's maximum positions");
  }
  std::unique_ptr<speculative::Scheduler> made =
      make_engine(s, dr.get(), so, fmt::format("--ctx {}", so.ctx));
  speculative::Scheduler& engine = *made;
  if (!a.json) print_state_memory(engine);
  speculative::Request req;
  apply_request_flags(a.spec, a.sampling, dr.get(), req, as.get());
  speculative::SpecOptions spec;
  spec.draft_k = req.draft_k;
  spec.p_min = req.p_min;
  spec.mode = req.mode;
  o.n_new = a.n;
  o.stop = a.stop;
  o.ctx = a.ctx;
  auto print = [&](std::string_view t) {
    if (a.json) return;
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  };
  speculative::GenerateResult r = speculative::generate(engine, ids, o, print, spec);
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
    j["memory"] = memory_json(engine);
    if (r.stats) j["stats"] = r.stats->to_json();
    if (dr) j["drafter"] = dr->path();
    if (as) j["drafter"] = as->path();
    if (as) j["assistant"] = assistant_json(*as, engine, r.stats ? &*r.stats : nullptr);
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("\n");
  std::fflush(stdout);
  if (as) print_assistant(*as);
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
  cmd->add_option("--stop", a->stop, "Stop string (repeatable): the text ends before it")
      ->check(cli::NonEmpty);
  cmd->add_option("--ctx", a->ctx,
                  "Context length: the KV cache holds this many positions (default: what this "
                  "generation needs, prompt + -n + drafts, capped by the model's maximum and "
                  "memory)");
  cmd->add_flag("--no-special", a->no_special, "Do not add BOS/EOS to the prompt");
  cmd->add_flag("--json", a->json, "Print one JSON object instead of streaming text");
  add_drafter_flags(cmd, a->spec, kAllDrafterFlags | kFlagTree);
  add_lookup_flags(cmd, a->lookup);
  cmd->add_option("--prompts", a->prompts,
                  "Generate for every prompt of a JSON Lines set ({\"prompt\": ...} per line), "
                  "--parallel at a time, each exactly as alone; with --json one line per prompt "
                  "(id = the line's \"id\", else its index among the prompts)")
      ->excludes(p);
  cmd->add_option("--parallel", a->parallel,
                  "With --prompts: sequences decoded at once (slots of the KV cache; --ctx "
                  "positions each, default min(model maximum, 2048))")
      ->check(cli::Range(1, 1024));
  cmd->add_option("--trace", a->trace,
                  "Write one JSON line per verify cycle per sequence to FILE: what each draft "
                  "source proposed, the tree verified, the target's choices, the accepted count "
                  "(docs/SEMANTICS.md, Trace)")
      ->check(cli::OutputFile);
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace mtp::app
