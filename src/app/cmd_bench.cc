// `mtpspec bench`: what speculation really gains, measured live.
// Plain and speculative generation interleaved on the same prompts (R repeats);
// live acceptance per module position beside the drafter's teacher-forced
// accuracy on a corpus and on the target's own outputs (the gap is printed);
// verify multiplier m(q); drafter cost per cycle; predicted vs measured speedup;
// break-even acceptance (spec/bench_math.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

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
  std::string drafter, prompts, corpus, report, plot;
  int n = 128, draft_k = 0, repeat = 3, max_prompts = 0;
  bool json = false;
};

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

void run_bench(const BenchArgs& a) {
  Session s = open_session(a.model);
  std::unique_ptr<drafter::Drafter> dr = open_drafter(a.model, a.drafter, *s.model);
  if (!dr) fail<InputError>("bench needs a drafter (--drafter FILE, or drafter.safetensors beside the model)");
  auto prompts = io::read_prompts(a.prompts);
  if (a.max_prompts > 0 && int(prompts.size()) > a.max_prompts) prompts.resize(a.max_prompts);
  const int K = a.draft_k > 0 ? a.draft_k : dr->config().K;
  const auto& c = s.model->config();
  ThreadPool* pool = s.pool.get();

  // 1. Interleaved plain / speculative runs.
  spec::GenerateOptions go;
  go.n_new = a.n;
  spec::SpecOptions so;
  so.drafter = dr.get();
  so.draft_k = K;
  std::vector<double> speedups;
  double base_tok = 0, base_s = 0, spec_tok = 0, spec_s = 0;
  spec::SpecStats live;
  live.drafted.assign(K, 0);
  live.accepted.assign(K, 0);
  live.time_module_s.assign(dr->config().K, 0);
  std::vector<std::vector<int32_t>> own;  // the target's own outputs (prompt + continuation)
  long flips = 0;
  for (int r = 0; r < a.repeat; ++r) {
    double bt = 0, bs = 0, st = 0, ss = 0;
    for (const auto& p : prompts) {
      auto ids = s.tokenizer->encode(p.prompt, true);
      spec::GenerateResult plain = spec::generate(*s.model, s.tokenizer.get(), ids, go, pool);
      spec::GenerateResult sp = spec::generate(*s.model, s.tokenizer.get(), ids, go, pool, nullptr, so);
      flips += plain.token_ids != sp.token_ids;
      bt += std::max(0, plain.timings.n_gen - 1), bs += plain.timings.gen_s;
      st += std::max(0, sp.timings.n_gen - 1), ss += sp.timings.gen_s;
      const auto& x = *sp.stats;
      live.cycles += x.cycles;
      live.emitted += x.emitted;
      for (int k = 0; k < K; ++k) live.drafted[k] += x.drafted[k], live.accepted[k] += x.accepted[k];
      live.time_draft_s += x.time_draft_s, live.time_verify_s += x.time_verify_s;
      live.time_other_s += x.time_other_s;
      for (size_t k = 0; k < x.time_module_s.size(); ++k) live.time_module_s[k] += x.time_module_s[k];
      if (r == 0) {
        std::vector<int32_t> seq = ids;
        seq.insert(seq.end(), plain.token_ids.begin(), plain.token_ids.end());
        own.push_back(std::move(seq));
      }
    }
    base_tok += bt, base_s += bs, spec_tok += st, spec_s += ss;
    if (bs > 0 && ss > 0) speedups.push_back((st / ss) / (bt / bs));
    fmt::print(stderr, "[bench] repeat {}/{}: plain {:.1f} tok/s, speculative {:.1f} tok/s\n", r + 1,
               a.repeat, bs > 0 ? bt / bs : 0, ss > 0 ? st / ss : 0);
  }
  BenchResult res;
  res.K = K;
  res.baseline_tok_s = base_s > 0 ? base_tok / base_s : 0;
  res.spec_tok_s = spec_s > 0 ? spec_tok / spec_s : 0;
  res.speedup = res.baseline_tok_s > 0 ? res.spec_tok_s / res.baseline_tok_s : 0;
  res.spread = spec::spread(speedups);
  res.acceptance_live = live.acceptance();
  res.tokens_per_cycle = live.tokens_per_cycle();
  res.flips = flips;

  // 2. Teacher-forced accuracy: the target's own outputs, and a corpus.
  res.acceptance_tf_own = tf_accuracy(*s.model, *dr, own, pool);
  if (!a.corpus.empty()) {
    std::vector<std::string> docs;
    io::read_corpus(a.corpus, docs);
    std::vector<std::vector<int32_t>> seqs;
    long budget = long(a.n) * long(prompts.size());
    // The last documents (precompute's held-out split is by hash; the tail is
    // what a training run with --max-tokens never reached).
    for (size_t i = docs.size(); i-- > 0 && budget > 0;) {
      auto ids = s.tokenizer->encode(docs[i], true);
      if (ids.size() > size_t(std::min(512, c.max_position))) ids.resize(std::min(512, c.max_position));
      if (ids.size() < 4) continue;
      budget -= long(ids.size());
      seqs.push_back(std::move(ids));
    }
    res.acceptance_tf_corpus = tf_accuracy(*s.model, *dr, seqs, pool);
  }

  // 3. Costs relative to one decode at a typical context length.
  const int pos = std::min(int(own.empty() ? 64 : own[0].size() / 2 + 1), c.max_position - 10);
  std::vector<double> ft = spec::forward_times(*s.model, std::max(1, pos), 8, 9, pool);
  for (double t : ft) res.verify_multiplier.push_back(t / ft[0]);
  const double t_dec = ft[0];
  for (size_t k = 0; k < live.time_module_s.size(); ++k) {
    res.drafter_cost.push_back(live.cycles ? live.time_module_s[k] / live.cycles / t_dec : 0);
  }
  const double c_total = live.cycles ? live.time_draft_s / live.cycles / t_dec : 0;
  const double m = res.verify_multiplier[std::min<size_t>(K, res.verify_multiplier.size() - 1)];
  res.predicted_speedup = spec::predicted_speedup(
      spec::expected_tokens_per_cycle(res.acceptance_live), m, c_total);
  res.break_even = spec::break_even_acceptance(K, m, c_total);
  res.cycle_cost = m + c_total;
  res.other_fraction = (live.time_draft_s + live.time_verify_s + live.time_other_s) > 0
      ? live.time_other_s / (live.time_draft_s + live.time_verify_s + live.time_other_s) : 0;

  print_bench(res, stderr);
  if (!a.report.empty()) write_bench_report(res, a.report, s.model->loaded().path, dr->path());
  if (!a.plot.empty()) write_bench_plot(res, a.plot);
  if (a.json) fmt::print("{}\n", bench_json(res).dump());
}
}  // namespace

void add_bench(CLI::App& root) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = root.add_subcommand(
      "bench", "Plain vs speculative generation, live acceptance, costs and break-even");
  add_model_flags(cmd, a->model);
  cmd->add_option("--drafter", a->drafter, "Drafter file (default: drafter.safetensors beside the model)");
  cmd->add_option("--prompts", a->prompts, "Prompts file (JSONL)")->required();
  cmd->add_option("-n", a->n, "New tokens per generation")->check(CLI::PositiveNumber);
  cmd->add_option("--draft-k", a->draft_k, "Drafts per cycle (default: the drafter's K)");
  cmd->add_option("--repeat", a->repeat, "Repeats (the speedup's spread is over these)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-prompts", a->max_prompts, "Use at most this many prompts");
  cmd->add_option("--corpus", a->corpus, "Corpus for the teacher-forced accuracy (text or .jsonl)");
  cmd->add_option("--report", a->report, "Write a Markdown report here");
  cmd->add_option("--plot", a->plot, "Write an SVG plot of speedup against acceptance here");
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace mtp::app
