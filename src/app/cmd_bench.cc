// `mtpspec bench`: what speculation really gains, measured live.
// Plain and speculative generation interleaved on the same prompts, R repeats
// (run_interleaved). Two modes:
//  - default: live acceptance per module position beside the drafter's
//    teacher-forced accuracy on a corpus and on the target's own outputs (the
//    gap is printed); verify multiplier m(q); drafter cost per cycle; predicted
//    vs measured speedup; break-even acceptance (spec/bench_math.h);
//  - --cycle-cost: for K = 1..4 (bounded by the drafter's K, or 1..--draft-k),
//    the measured cost of one cycle relative to one plain decode step, split
//    draft / verify / other (spec::cycle_cost).
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

#include "app/bench_report.h"
#include "app/commands.h"
#include "app/common.h"
#include "app/spec_common.h"
#include "core/error.h"
#include "io/corpus.h"
#include "io/prompts.h"
#include "spec/bench_math.h"
#include "spec/forward_timing.h"
#include "spec/generate.h"
#include "spec/teacher_forced.h"

namespace mtp::app {

namespace {
struct BenchArgs {
  ModelArgs model;
  std::string random, drafter, prompts, corpus, report, plot;
  uint64_t seed = 0;
  int n = 128, draft_k = 0, repeat = 3, max_prompts = 0;
  bool json = false, cycle_cost = false;
};

// What bench runs on: a target (tokenizer null for a random one), a drafter,
// and the prompts as token ids.
struct BenchTarget {
  Session session;
  std::unique_ptr<drafter::Drafter> drafter;
  std::string model_name, drafter_name;
  std::vector<std::vector<int32_t>> prompts;
};

// Speculative runs at one draft length, summed over repeats and prompts.
struct SpecRuns {
  int K = 0;
  spec::SpecStats stats;           // cycles, acceptance, time split, per-module time
  double tokens = 0, seconds = 0;  // generation: (n_gen − 1) tokens over gen_s
  double total_s = 0;              // prompt processing + generation (prompt_s + gen_s)
  std::vector<double> speedups;    // per repeat: its spec tok/s over its plain tok/s
};

struct InterleavedRuns {
  double plain_tokens = 0, plain_seconds = 0;  // as SpecRuns::tokens / seconds
  double plain_total_s = 0;                    // as SpecRuns::total_s
  std::vector<SpecRuns> spec;                  // [i] for Ks[i]
  long flips = 0;                              // speculative runs whose output differed
  std::vector<std::vector<int32_t>> own;       // prompt + plain continuation (repeat 1)
  std::vector<std::vector<int32_t>> plain_out; // plain continuations only (repeat 1)

  // Seconds of one plain decode step (generation time per token after the first).
  double decode_step_s() const { return plain_tokens > 0 ? plain_seconds / plain_tokens : 0; }
};

// into += x: counters and times. Same draft length and drafter (same vector sizes).
void accumulate(spec::SpecStats& into, const spec::SpecStats& x) {
  into.cycles += x.cycles;
  into.emitted += x.emitted;
  for (size_t k = 0; k < x.drafted.size(); ++k) into.drafted[k] += x.drafted[k];
  for (size_t k = 0; k < x.accepted.size(); ++k) into.accepted[k] += x.accepted[k];
  into.time_draft_s += x.time_draft_s;
  into.time_verify_s += x.time_verify_s;
  into.time_other_s += x.time_other_s;
  for (size_t k = 0; k < x.time_module_s.size(); ++k) into.time_module_s[k] += x.time_module_s[k];
}

double generated_steps(const spec::GenerateResult& r) { return std::max(0, r.timings.n_gen - 1); }
double rate(double tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0; }

// Plain and speculative generation interleaved on the same prompts, so a drift
// in machine speed hits both alike: per repeat and prompt, one plain run, then
// one speculative run for each draft length in Ks (in order; each in 1..the
// drafter's K, else InputError), n new tokens each. Greedy, so every
// speculative output must equal the plain one token for token; a run where it
// does not counts as a flip. Progress: one stderr line per repeat and prompt.
InterleavedRuns run_interleaved(const BenchTarget& t, const std::vector<int>& Ks, int n,
                                int repeat) {
  const int k_max = t.drafter->config().K;
  for (int K : Ks) {
    if (K < 1 || K > k_max) fail<InputError>("draft length {} is outside 1..{} (the drafter's K)", K, k_max);
  }
  const model::Model& m = *t.session.model;
  const io::Tokenizer* tok = t.session.tokenizer.get();
  ThreadPool* pool = t.session.pool.get();
  spec::GenerateOptions go;
  go.n_new = n;
  InterleavedRuns out;
  for (int K : Ks) {
    SpecRuns s;
    s.K = K;
    s.stats.drafted.assign(K, 0);
    s.stats.accepted.assign(K, 0);
    s.stats.time_module_s.assign(k_max, 0);
    out.spec.push_back(std::move(s));
  }
  for (int r = 0; r < repeat; ++r) {
    double bt = 0, bs = 0;
    std::vector<double> st(Ks.size(), 0), ss(Ks.size(), 0);
    for (size_t p = 0; p < t.prompts.size(); ++p) {
      const auto& ids = t.prompts[p];
      spec::GenerateResult plain = spec::generate(m, tok, ids, go, pool);
      bt += generated_steps(plain), bs += plain.timings.gen_s;
      out.plain_total_s += plain.timings.prompt_s + plain.timings.gen_s;
      std::string line = fmt::format("[bench] repeat {}/{}, prompt {}/{}: plain {:.1f} tok/s", r + 1,
                                     repeat, p + 1, t.prompts.size(),
                                     rate(generated_steps(plain), plain.timings.gen_s));
      for (size_t i = 0; i < Ks.size(); ++i) {
        spec::SpecOptions so;
        so.drafter = t.drafter.get();
        so.draft_k = Ks[i];
        spec::GenerateResult sp = spec::generate(m, tok, ids, go, pool, nullptr, so);
        out.flips += plain.token_ids != sp.token_ids;
        st[i] += generated_steps(sp), ss[i] += sp.timings.gen_s;
        out.spec[i].total_s += sp.timings.prompt_s + sp.timings.gen_s;
        accumulate(out.spec[i].stats, *sp.stats);
        line += fmt::format(" | K={} {:.1f} tok/s", Ks[i], rate(generated_steps(sp), sp.timings.gen_s));
      }
      fmt::print(stderr, "{}\n", line);
      if (r == 0) {
        std::vector<int32_t> seq = ids;
        seq.insert(seq.end(), plain.token_ids.begin(), plain.token_ids.end());
        out.own.push_back(std::move(seq));
        out.plain_out.push_back(plain.token_ids);
      }
    }
    out.plain_tokens += bt, out.plain_seconds += bs;
    for (size_t i = 0; i < Ks.size(); ++i) {
      out.spec[i].tokens += st[i], out.spec[i].seconds += ss[i];
      if (bs > 0 && ss[i] > 0) out.spec[i].speedups.push_back(rate(st[i], ss[i]) / rate(bt, bs));
    }
  }
  return out;
}

// --random: the drafter's K, and the token-id prompts (count unless --max-prompts).
constexpr int kRandomDrafterK = 4, kRandomPrompts = 4, kRandomPromptLen = 16;
// --cycle-cost sweeps K = 1..this (or 1..--draft-k).
constexpr int kSweepMaxK = 4;

BenchTarget open_target(const BenchArgs& a) {
  BenchTarget t;
  if (a.random.empty()) {
    if (a.model.model.empty()) fail<InputError>("bench needs a target: -m MODEL, or --random 1b|tiny");
    if (a.prompts.empty()) fail<InputError>("bench -m MODEL needs --prompts FILE (JSONL)");
    t.session = open_session(a.model);
    t.drafter = open_drafter(a.model, a.drafter, *t.session.model);
    if (!t.drafter) fail<InputError>("bench needs a drafter (--drafter FILE, or drafter.safetensors beside the model)");
    t.model_name = t.session.model->loaded().path;
    t.drafter_name = t.drafter->path();
    auto prompts = io::read_prompts(a.prompts);
    if (a.max_prompts > 0 && int(prompts.size()) > a.max_prompts) prompts.resize(a.max_prompts);
    for (const auto& p : prompts) t.prompts.push_back(t.session.tokenizer->encode(p.prompt, true));
    return t;
  }
  const std::pair<const char*, const std::string*> files[] = {
      {"-m", &a.model.model}, {"--tokenizer", &a.model.tokenizer}, {"--drafter", &a.drafter},
      {"--prompts", &a.prompts}, {"--corpus", &a.corpus}};
  for (const auto& [flag, value] : files) {
    if (!value->empty()) {
      fail<InputError>("--random {} cannot be combined with {}: a random target has no tokenizer; "
                       "its drafter and token-id prompts are generated", a.random, flag);
    }
  }
  const int K = std::max(kRandomDrafterK, a.draft_k);
  fmt::print(stderr, "[bench] generating random target '{}' (seed {}) and a random K={} drafter ...\n",
             a.random, a.seed, K);
  t.session = open_random_session(a.random, a.model, a.seed);
  t.drafter = random_drafter(*t.session.model, K, a.seed + 1, parse_weight_type(a.model.weights));
  t.model_name = t.session.model->loaded().path;
  t.drafter_name = fmt::format("random:K={}:seed={}", K, a.seed + 1);
  std::mt19937_64 rng(a.seed);
  const int vocab = t.session.model->config().vocab;
  t.prompts.assign(a.max_prompts > 0 ? a.max_prompts : kRandomPrompts, {});
  for (auto& p : t.prompts) {
    for (int i = 0; i < kRandomPromptLen; ++i) p.push_back(int32_t(rng() % uint64_t(vocab)));
  }
  return t;
}

// Mean teacher-forced accuracy per module over token sequences.
std::vector<double> tf_accuracy(const model::Model& m, const drafter::Drafter& d,
                                const std::vector<std::vector<int32_t>>& seqs, ThreadPool* pool) {
  std::vector<double> right(d.config().K, 0), rows(d.config().K, 0);
  for (const auto& s : seqs) {
    spec::TeacherForced tf = spec::teacher_forced(m, d, s, pool);
    for (int k = 0; k < d.config().K; ++k) {
      right[k] += tf.accuracy[k] * double(tf.rows[k]);
      rows[k] += double(tf.rows[k]);
    }
  }
  for (int k = 0; k < d.config().K; ++k) right[k] = rows[k] > 0 ? right[k] / rows[k] : 0;
  return right;
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

void run_bench(const BenchArgs& a) {
  const BenchTarget t = open_target(a);
  const drafter::Drafter& dr = *t.drafter;
  const int K = a.draft_k > 0 ? a.draft_k : dr.config().K;
  const model::Model& m = *t.session.model;
  ThreadPool* pool = t.session.pool.get();

  // 1. Interleaved plain / speculative runs.
  const InterleavedRuns runs = run_interleaved(t, {K}, a.n, a.repeat);
  const SpecRuns& sr = runs.spec[0];
  const spec::SpecStats& live = sr.stats;
  BenchResult res;
  res.K = K;
  res.baseline_tok_s = rate(runs.plain_tokens, runs.plain_seconds);
  res.spec_tok_s = rate(sr.tokens, sr.seconds);
  res.speedup = res.baseline_tok_s > 0 ? res.spec_tok_s / res.baseline_tok_s : 0;
  res.spread = spec::spread(sr.speedups);
  res.end_to_end_speedup = sr.total_s > 0 ? runs.plain_total_s / sr.total_s : 0;
  res.acceptance_live = live.acceptance();
  res.tokens_per_cycle = live.tokens_per_cycle();
  res.flips = runs.flips;
  res.target_distinct_2 = spec::distinct_n(runs.plain_out, 2);

  // 2. Teacher-forced accuracy: the target's own outputs, and a corpus.
  res.acceptance_tf_own = tf_accuracy(m, dr, runs.own, pool);
  if (!t.session.tokenizer) {
    res.acceptance_tf_corpus_note = "random target: no tokenizer to read a corpus";
  } else if (a.corpus.empty()) {
    res.acceptance_tf_corpus_note = "no --corpus given";
  } else {
    auto seqs = corpus_tail(a.corpus, t.session, long(a.n) * long(t.prompts.size()));
    res.acceptance_tf_corpus = tf_accuracy(m, dr, seqs, pool);
  }

  // 3. Costs relative to one decode at a typical context length.
  const int pos = std::min(int(runs.own.empty() ? 64 : runs.own[0].size() / 2 + 1),
                           m.config().max_position - 10);
  std::vector<double> ft = spec::forward_times(m, std::max(1, pos), 8, 9, pool);
  for (double x : ft) res.verify_multiplier.push_back(x / ft[0]);
  const double t_dec = ft[0];
  for (double s : live.time_module_s) res.drafter_cost.push_back(live.cycles ? s / live.cycles / t_dec : 0);
  const double c_total = live.cycles ? live.time_draft_s / live.cycles / t_dec : 0;
  const double mk = res.verify_multiplier[std::min<size_t>(K, res.verify_multiplier.size() - 1)];
  res.predicted_speedup = spec::predicted_speedup(
      spec::expected_tokens_per_cycle(res.acceptance_live), mk, c_total);
  res.break_even = spec::break_even_acceptance(K, mk, c_total);
  res.cycle_cost = mk + c_total;
  res.other_fraction = spec::cycle_cost(live.cycles, live.time_draft_s, live.time_verify_s,
                                        live.time_other_s, 1.0).other_fraction;

  print_bench(res, stderr);
  if (!a.report.empty()) write_bench_report(res, a.report, t.model_name, t.drafter_name);
  if (!a.plot.empty()) write_bench_plot(res, a.plot);
  if (a.json) fmt::print("{}\n", bench_json(res).dump());
}

void run_cycle_cost(const BenchArgs& a) {
  for (const auto& [flag, value] : {std::pair{"--corpus", &a.corpus}, std::pair{"--report", &a.report},
                                    std::pair{"--plot", &a.plot}}) {
    if (!value->empty()) fail<InputError>("{} is not used by --cycle-cost", flag);
  }
  const BenchTarget t = open_target(a);
  const int k_hi = a.draft_k > 0 ? a.draft_k : std::min(kSweepMaxK, t.drafter->config().K);
  std::vector<int> Ks;
  for (int k = 1; k <= k_hi; ++k) Ks.push_back(k);
  const InterleavedRuns runs = run_interleaved(t, Ks, a.n, a.repeat);
  CycleCostResult res;
  res.model = t.model_name;
  res.drafter = t.drafter_name;
  res.threads = t.session.pool->size();
  res.decode_step_s = runs.decode_step_s();
  res.flips = runs.flips;
  for (const SpecRuns& s : runs.spec) {
    const auto& x = s.stats;
    const double module_s = std::accumulate(x.time_module_s.begin(), x.time_module_s.end(), 0.0);
    res.rows.push_back({s.K, spec::cycle_cost(x.cycles, x.time_draft_s, x.time_verify_s,
                                              x.time_other_s, res.decode_step_s),
                        spec::cycle_cost(x.cycles, module_s, 0, 0, res.decode_step_s).draft_rel,
                        x.tokens_per_cycle(), x.acceptance(), x.cycles, rate(s.tokens, s.seconds)});
  }
  print_cycle_cost(res, stderr);
  if (a.json) fmt::print("{}\n", cycle_cost_json(res).dump());
}
}  // namespace

void add_bench(CLI::App& root) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = root.add_subcommand(
      "bench", "Plain vs speculative generation, live acceptance, costs and break-even");
  add_model_flags(cmd, a->model);
  CLI::Option* model = cmd->get_option("--model");
  model->required(false);
  model->description("Target model (Hugging Face directory or llama2.c .bin); or --random");
  CLI::Option* random = cmd->add_option(
      "--random", a->random,
      "Instead of -m: a random target generated in memory (1b | tiny), with a random K=4 drafter "
      "and 4 random 16-token prompts (--max-prompts sets the count); no tokenizer, so no "
      "--prompts, --drafter or --corpus");
  cmd->add_option("--seed", a->seed, "Seed of the random target (its drafter and prompts: seed + 1, seed)")
      ->needs(random);
  cmd->add_option("--drafter", a->drafter, "Drafter file (default: drafter.safetensors beside the model)");
  cmd->add_option("--prompts", a->prompts, "Prompts file (JSONL); required with -m");
  cmd->add_option("-n", a->n, "New tokens per generation")->check(CLI::PositiveNumber);
  cmd->add_option("--draft-k", a->draft_k,
                  "Drafts per cycle (default: the drafter's K); with --cycle-cost the largest K swept")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeat", a->repeat, "Repeats (the speedup's spread is over these)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-prompts", a->max_prompts, "Use at most this many prompts")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--corpus", a->corpus, "Corpus for the teacher-forced accuracy (text or .jsonl)");
  cmd->add_option("--report", a->report, "Write a Markdown report here");
  cmd->add_option("--plot", a->plot, "Write an SVG plot of speedup against acceptance here");
  cmd->add_flag("--cycle-cost", a->cycle_cost,
                "Instead: cost of one cycle for K = 1..4 (bounded by the drafter's K, or 1..--draft-k) "
                "relative to one plain decode step, split draft / verify / other");
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { a->cycle_cost ? run_cycle_cost(*a) : run_bench(*a); });
}

}  // namespace mtp::app
