// `mtpspec bench`: what speculation really gains, measured live.
// Plain and speculative generation interleaved on the same prompts, R repeats
// (run_interleaved). Two modes:
//  - default: live acceptance per module position beside the drafter's
//    teacher-forced accuracy on a corpus and on the target's own outputs (the
//    gap is printed); verify multiplier m(q); drafter cost per cycle; predicted
//    vs measured speedup; break-even acceptance (speculative/bench_math.h);
//  - --cycle-cost: for K = 1..4 (bounded by the drafter's K, or 1..--draft-k),
//    the measured cost of one cycle relative to one plain decode step, split
//    draft / verify / other (speculative::cycle_cost).
// The target is a checkpoint (-m, with a drafter file and text prompts) or a
// random target generated in memory (--random 1b|tiny) with a random K = 4
// drafter and random token-id prompts; what needs text (corpus accuracy) is
// then skipped and reported as null with the reason.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "cli/checks.h"
#include "app/bench_report.h"
#include "app/commands.h"
#include "app/common.h"
#include "app/spec_common.h"
#include "core/error.h"
#include "io/corpus.h"
#include "io/prompts.h"
#include "measure/bench.h"
#include "measure/bench_sources.h"

namespace mtp::app {

namespace {
struct BenchArgs {
  ModelArgs model;
  DrafterArgs spec;
  LookupArgs lookup;
  std::vector<std::string> sources;  // --sources
  std::vector<std::string> trees;    // --trees
  SamplingArgs sampling;
  std::vector<float> temps;                       // --temps
  std::vector<std::string> modes = {"coupled"};  // --spec-sampling (a list here)
  std::string random, prompts, corpus, report, plot;
  uint64_t seed = 0;
  int n = 128, repeat = 3, max_prompts = 0;
  bool json = false, cycle_cost = false;
};

// What bench runs on: a target (tokenizer null for a random one), a drafter,
// and the prompts as token ids.
struct BenchTarget {
  Session session;
  std::unique_ptr<drafter::Drafter> drafter;
  std::shared_ptr<const drafter::Gemma4Assistant> assistant;  // --drafter ASSISTANT instead
  std::string model_name, drafter_name;
  std::string held;  // held_types(): the precision the numbers were measured at
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> kinds;  // [prompt]: "kind" of the prompts file ("" = none)
  std::vector<std::string> labels;  // [prompt]: its "id" in the prompts file, else its number
};

speculative::BenchInputs inputs(const BenchTarget& t, BenchArgs& a) {
  speculative::BenchInputs in{t.session.model.get(), t.session.tokenizer.get(), t.drafter.get(),
                       t.assistant, t.prompts, t.session.pool.get()};
  in.sampling = sampler_options(a.sampling);
  in.mode = spec_sampling_mode(a.sampling);
  in.labels = t.labels;
  return in;
}

// --random: the drafter's K, and the token-id prompts (count unless --max-prompts).
constexpr int kRandomDrafterK = 4, kRandomPrompts = 4, kRandomPromptLen = 16;
// --cycle-cost sweeps K = 1..this (or 1..--draft-k).
constexpr int kSweepMaxK = 4;

// drafter_required false: a target without a drafter is run too (--sources
// without mtp: the lookups alone, and the union of them).
BenchTarget open_target(const BenchArgs& a, bool drafter_required = true) {
  BenchTarget t;
  if (a.random.empty()) {
    if (a.model.model.empty()) fail<InputError>("bench needs a target: -m MODEL, or --random 1b|tiny");
    if (a.prompts.empty()) fail<InputError>("bench -m MODEL needs --prompts FILE (JSONL)");
    t.session = open_session(a.model);
    t.drafter = open_drafter(a.model, a.spec, *t.session.model);
    t.assistant = open_assistant(a.model, a.spec, *t.session.model);
    if (!t.drafter && !t.assistant && drafter_required) {
      fail<InputError>("bench needs a drafter (--drafter FILE, or drafter.safetensors beside the "
                       "model){}", a.sources.empty() ? "" : " for --sources mtp or mtp-nogate");
    }
    t.model_name = t.session.model->loaded().path;
    t.held = held_types(*t.session.model);
    t.drafter_name = t.drafter ? t.drafter->path() : t.assistant ? t.assistant->path() : "none";
    auto prompts = io::read_prompts(a.prompts);
    if (a.max_prompts > 0 && int(prompts.size()) > a.max_prompts) prompts.resize(a.max_prompts);
    const PromptBound bound = prompt_bound(t.session, 0);
    for (const auto& p : prompts) {
      t.labels.push_back(p.label(t.prompts.size() + 1));
      t.prompts.push_back(encode_prompt(t.session, p.prompt, true, bound,
                                        fmt::format("--prompts '{}' prompt {}", a.prompts,
                                                    t.labels.back())));
      t.kinds.push_back(p.kind);
    }
    return t;
  }
  const std::pair<const char*, const std::string*> files[] = {
      {"-m", &a.model.model}, {"--tokenizer", &a.model.tokenizer}, {"--drafter", &a.spec.drafter},
      {"--prompts", &a.prompts}, {"--corpus", &a.corpus}};
  for (const auto& [flag, value] : files) {
    if (!value->empty()) {
      fail<InputError>("--random {} cannot be combined with {}: a random target has no tokenizer; "
                       "its drafter and token-id prompts are generated", a.random, flag);
    }
  }
  const int K = std::max(kRandomDrafterK, a.spec.draft_k_given ? a.spec.draft_k : 0);
  fmt::print(stderr, "[bench] generating random target '{}' (seed {}) and a random K={} drafter ...\n",
             a.random, a.seed, K);
  t.session = open_random_session(a.random, a.model, a.seed);
  t.drafter = random_drafter(*t.session.model, K, a.seed + 1, drafter_weight_type(a.model.weights));
  t.model_name = t.session.model->loaded().path;
  t.held = held_types(*t.session.model);
  t.drafter_name = fmt::format("random:K={}:seed={}", K, a.seed + 1);
  std::mt19937_64 rng(a.seed);
  const int vocab = t.session.model->config().vocab;
  t.prompts.assign(a.max_prompts > 0 ? a.max_prompts : kRandomPrompts, {});
  for (auto& p : t.prompts) {
    for (int i = 0; i < kRandomPromptLen; ++i) p.push_back(int32_t(rng() % uint64_t(vocab)));
  }
  t.kinds.assign(t.prompts.size(), "");
  return t;
}

// Gemma 4's assistant runs in bench --cycle-cost (live acceptance per
// position, its cost per cycle and per draft step); what needs the K-module
// drafter is refused naming the drafter.
void refuse_assistant(const BenchTarget& t, const char* what) {
  if (t.assistant) {
    fail<InputError>("--drafter '{}' is Gemma 4's assistant: bench measures it with --cycle-cost "
                     "(live acceptance per position and its cost per draft step); {} needs the "
                     "K-module drafter", t.assistant->path(), what);
  }
}

// Corpus documents as token sequences (≤ 512 tokens, ≥ 4), from the last one
// back, about `budget` tokens in all (precompute's held-out split is by hash;
// the tail is what a training run with --max-tokens never reached).
std::vector<std::vector<int32_t>> corpus_tail(const std::string& path, const Session& s, long budget) {
  std::vector<std::string> docs;
  io::read_corpus(path, docs);
  const int max_len = std::min(512, s.model->config().max_position);
  std::vector<std::vector<int32_t>> seqs;
  for (size_t i = docs.size(); i-- > 0 && budget > 0;) {
    auto ids = s.tokenizer->encode(docs[i], true);
    if (ids.size() > size_t(max_len)) ids.resize(max_len);
    if (ids.size() < 4) continue;
    budget -= long(ids.size());
    seqs.push_back(std::move(ids));
  }
  return seqs;
}

void run_bench(BenchArgs a) {
  if (!a.lookup.lookup.empty() || !a.lookup.corpus.empty()) {
    fail<InputError>("bench compares lookup sources with --sources mtp,prompt,history,union");
  }
  if (!a.lookup.sources.empty()) {  // the default bench measures the drafter only
    fail<InputError>("--draft-source: bench measures other draft sources with --sources (e.g. "
                     "--sources native-mtp,mtp)");
  }
  for (const auto& [flag, out] : {std::pair{"--report", &a.report}, std::pair{"--plot", &a.plot}}) {
    cli::refuse_output_over_inputs(flag, *out, false,
                                   {{"--prompts", &a.prompts}, {"--corpus", &a.corpus},
                                    {"-m", &a.model.model}, {"--tokenizer", &a.model.tokenizer},
                                    {"--drafter", &a.spec.drafter}});
  }
  if (!a.report.empty() && a.report == a.plot) {
    fail<InputError>("--report and --plot are both '{}': give them different files", a.report);
  }
  // Every --temps value is checked before any model is loaded or run.
  for (float temp : a.temps) {
    SamplingArgs at = a.sampling;
    at.temp = temp;
    sampler_options(at);  // InputError naming --temp and the value
  }
  const BenchTarget t = open_target(a);
  refuse_assistant(t, "the default bench (teacher-forced accuracy, per-module costs)");
  const drafter::Drafter& dr = *t.drafter;
  const int K = resolve_draft_k(a.spec, dr.config().K, "the drafter's K", dr.config().K);
  std::vector<std::vector<int32_t>> corpus;
  std::string corpus_note;
  if (!t.session.tokenizer) {
    corpus_note = "random target: no tokenizer to read a corpus";
  } else if (a.corpus.empty()) {
    corpus_note = "no --corpus given";
  } else {
    corpus = corpus_tail(a.corpus, t.session, long(a.n) * long(t.prompts.size()));
    // Else the teacher-forced accuracy would be printed as 0 of 0 positions.
    if (corpus.empty()) {
      fail<InputError>("--corpus '{}': no document of at least 4 tokens to measure on", a.corpus);
    }
  }
  std::vector<speculative::SpecSampling> modes;
  for (const std::string& m : a.modes) {
    SamplingArgs one = a.sampling;
    one.spec_sampling = m;
    modes.push_back(spec_sampling_mode(one));
  }
  const speculative::BenchInputs in = inputs(t, a);
  speculative::BenchResult res = speculative::measure_bench(in, K, a.n, a.repeat,
                                              corpus_note.empty() ? &corpus : nullptr,
                                              corpus_note);
  if (!a.temps.empty()) {
    res.by_temperature = speculative::measure_temperatures(in, K, a.n, a.repeat, a.temps, modes);
  }
  print_bench(res, stderr);
  if (!a.report.empty()) {
    write_bench_report(res, a.report, t.model_name, t.held, t.drafter_name);
  }
  if (!a.plot.empty()) write_bench_plot(res, a.plot);
  if (a.json) {
    nlohmann::json j = res.to_json();
    j["held"] = t.held;
    fmt::print("{}\n", j.dump());
  }
}

// A comparison's JSON with what it ran on, one line on stdout.
void print_json(nlohmann::json j, const BenchTarget& t, const BenchArgs& a) {
  j["model"] = t.model_name;
  j["held"] = t.held;
  j["drafter"] = t.drafter_name;
  j["n"] = a.n;
  j["repeat"] = a.repeat;
  j["sampling"] = sampling_json(a.sampling);
  fmt::print("{}\n", j.dump());
}

void run_sources(BenchArgs a) {
  if (a.cycle_cost || !a.temps.empty() || !a.report.empty() || !a.plot.empty() || !a.corpus.empty()) {
    fail<InputError>("--sources runs its own comparison: not with --cycle-cost, --temps, --report, "
                     "--plot or --corpus");
  }
  if (!a.lookup.lookup.empty()) {
    fail<InputError>("with --sources, --lookup is implied (prompt, history and union name the lookups)");
  }
  const bool mtp = std::any_of(a.sources.begin(), a.sources.end(),
                               [](const std::string& s) { return s == "mtp" || s == "mtp-nogate"; });
  const BenchTarget t = open_target(a, mtp);
  refuse_assistant(t, "--sources");
  speculative::SourceBenchOptions o;
  o.sources = a.sources;
  o.kinds = t.kinds;
  o.lookup.ngram_max = a.lookup.ngram_max;
  o.lookup.max_draft = a.lookup.max_draft;
  o.history_mb = a.lookup.history_mb;
  o.gate = !a.lookup.no_gate;
  if (!a.lookup.corpus.empty()) {
    LookupArgs la = a.lookup;
    la.lookup = {"history"};
    o.corpus = lookup_corpus(la, t.session.tokenizer.get());
  }
  if (t.drafter) {  // else the union is the lookups' alone
    const int dk = t.drafter->config().K;
    o.draft_k = resolve_draft_k(a.spec, dk, "the drafter's K", dk);
  } else if (a.spec.draft_k_given) {
    fail<InputError>("--draft-k needs a drafter (--drafter FILE, or drafter.safetensors beside "
                     "the model)");
  }
  const speculative::SourcesResult res = speculative::run_sources(inputs(t, a), o, a.n, a.repeat);
  print_sources(res, stderr);
  if (a.json) print_json(res.to_json(), t, a);
}

void run_trees(BenchArgs a) {
  if (a.cycle_cost || !a.temps.empty() || !a.report.empty() || !a.plot.empty() || !a.corpus.empty() ||
      !a.sources.empty()) {
    fail<InputError>("--trees runs its own comparison: not with --cycle-cost, --temps, --report, "
                     "--plot, --corpus or --sources");
  }
  const BenchTarget t = open_target(a);
  refuse_assistant(t, "--trees (its shape comparison runs the MTP modules)");
  const int dk = t.drafter->config().K;
  const int k = resolve_draft_k(a.spec, dk, "the drafter's K", dk);
  const speculative::TreesResult res = speculative::run_trees(inputs(t, a), a.trees, k, a.n, a.repeat);
  print_trees(res, stderr);
  if (a.json) print_json(res.to_json(), t, a);
}

void run_cycle_cost(BenchArgs a) {
  for (const auto& [flag, value] : {std::pair{"--corpus", &a.corpus}, std::pair{"--report", &a.report},
                                    std::pair{"--plot", &a.plot}}) {
    if (!value->empty()) fail<InputError>("{} is not used by --cycle-cost", flag);
  }
  const BenchTarget t = open_target(a);
  const int dk = t.drafter ? t.drafter->config().K : kAssistantMaxSteps;
  const int k_hi = resolve_draft_k(a.spec, dk, t.drafter ? "the drafter's K" : "the assistant's steps",
                                   std::min(kSweepMaxK, dk));
  speculative::CycleCostResult res = speculative::measure_cycle_cost(inputs(t, a), k_hi, a.n, a.repeat);
  res.model = t.model_name;
  res.drafter = t.drafter_name;
  print_cycle_cost(res, stderr);
  if (a.json) fmt::print("{}\n", res.to_json().dump());
}
}  // namespace

void add_bench(CLI::App& root) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = root.add_subcommand(
      "bench", "Plain vs speculative generation, live acceptance, costs and break-even");
  add_model_flags(cmd, a->model);
  CLI::Option* model = cmd->get_option("--model");
  model->required(false);
  model->description("Target model (Hugging Face directory, GGUF file or llama2.c .bin); or --random");
  CLI::Option* random = cmd->add_option(
      "--random", a->random,
      "Instead of -m: a random target generated in memory (1b | tiny), with a random K=4 drafter "
      "and 4 random 16-token prompts (--max-prompts sets the count); no tokenizer, so no "
      "--prompts, --drafter or --corpus");
  cmd->add_option("--random-seed", a->seed,
                  "Seed of the random target (its drafter and prompts: seed + 1, seed)")
      ->needs(random);
  add_drafter_flags(cmd, a->spec, kFlagDrafter | kFlagDraftK, "",
                    "Drafts per cycle, 1..K (default: the drafter's K); with --cycle-cost the "
                    "largest K swept");
  cmd->add_option("--prompts", a->prompts, "Prompts file (JSONL); required with -m");
  cmd->add_option("-n", a->n, "New tokens per generation")->check(cli::Positive);
  cmd->add_option("--repeat", a->repeat, "Repeats (the speedup's spread is over these)")
      ->check(cli::Positive);
  cmd->add_option("--max-prompts", a->max_prompts, "Use at most this many prompts (0 = all; 4 with --random)")
      ->check(cli::NonNegative);
  cmd->add_option("--corpus", a->corpus, "Corpus for the teacher-forced accuracy (text or .jsonl)");
  cmd->add_option("--report", a->report, "Write a Markdown report here")
      ->check(cli::OutputFile);
  cmd->add_option("--plot", a->plot, "Write an SVG plot of speedup against acceptance here")
      ->check(cli::OutputFile);
  cmd->add_flag("--cycle-cost", a->cycle_cost,
                "Instead: cost of one cycle for K = 1..4 (bounded by the drafter's K, or 1..--draft-k) "
                "relative to one plain decode step, split draft / verify / other");
  add_sampling_flags(cmd, a->sampling, /*with_mode=*/false);
  cmd->add_option("--temps", a->temps,
                  "Also run at these temperatures (comma separated, e.g. 0,0.3,0.7,1.0): "
                  "acceptance, tokens per cycle, speedup and outputs differing, per mode")
      ->delimiter(',');
  cmd->add_option("--spec-sampling", a->modes,
                  "Speculative sampling modes for --temps and T > 0 runs (comma separated): "
                  "coupled (output == plain for the seed), rejection (min(1, p/q))")
      ->delimiter(',')
      ->check(CLI::IsMember({"coupled", "rejection"}));
  cmd->add_option("--sources", a->sources,
                  "Instead: each draft source alone and the union vs plain, per prompt \"kind\" "
                  "(comma separated): mtp (gated), mtp-nogate (every cycle), prompt, history "
                  "(other prompts' outputs and --lookup-corpus, never the prompt's own runs), union "
                  "(with the drafter if there is one; without mtp no drafter is needed)")
      ->delimiter(',')
      ->check(CLI::IsMember(speculative::bench_source_names()));
  cmd->add_option("--trees", a->trees,
                  "Instead: draft-tree shapes vs plain and each other at one draft length "
                  "(--draft-k), interleaved per prompt (space separated): chain, W1,W2,... "
                  "(children per node per depth), budget=N, auto")
      ->expected(1, 32);
  add_lookup_flags(cmd, a->lookup);
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] {
    a->sampling.spec_sampling = a->modes.empty() ? "coupled" : a->modes.front();
    if (!a->trees.empty()) return run_trees(*a);
    if (!a->sources.empty()) return run_sources(*a);
    a->cycle_cost ? run_cycle_cost(*a) : run_bench(*a);
  });
}

}  // namespace mtp::app
