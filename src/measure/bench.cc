#include "measure/bench.h"

#include <fmt/core.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "drafter/teacher_forced.h"
#include "speculative/policy/forward_timing.h"
#include "speculative/scheduler/generate.h"

namespace mtp::speculative {

namespace {

nlohmann::json or_null(const std::vector<double>& v) {
  return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
}
nlohmann::json or_null(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}
}  // namespace

double generated_steps(const GenerateResult& r) { return std::max(0, r.timings.n_gen - 1); }

std::unique_ptr<Scheduler> bench_engine(const BenchInputs& in, int n, const SpecOptions& spec) {
  size_t longest_prompt = 1;
  for (const auto& p : in.prompts) longest_prompt = std::max(longest_prompt, p.size());
  const int longest = std::max({spec.drafter ? spec.drafter->config().K : 0,
                                spec.assistant ? spec.draft_k : 0,
                                spec.sources.empty() ? 0 : spec.lookup.max_draft, 1});
  GenerateOptions go;
  go.n_new = n;
  const int64_t needed = int64_t(longest_prompt) + n + longest + 1;
  return std::make_unique<Scheduler>(*in.model, in.tokenizer, spec.drafter,
                                     engine_options(in.model->config(), go, spec, needed), in.pool);
}

InterleavedRuns run_interleaved(const BenchInputs& in, const std::vector<int>& Ks, int n,
                                int repeat) {
  MTP_CHECK((in.drafter != nullptr) != (in.assistant != nullptr),
            "a bench runs one drafter: the K modules or the assistant");
  const int k_max = in.drafter ? in.drafter->config().K
                               : Ks.empty() ? 1 : *std::max_element(Ks.begin(), Ks.end());
  for (int K : Ks) {
    if (K < 1 || K > k_max) {
      fail<InputError>("draft length {} is outside 1..{} (the drafter's K)", K, k_max);
    }
  }
  GenerateOptions go;
  go.n_new = n;
  InterleavedRuns out;
  const uint64_t seed = in.sampling.seed;
  // One engine per configuration, kept across prompts and repeats: the
  // drafter at draft length K every cycle (the bench measures that length;
  // no budget decides it).
  const std::unique_ptr<Scheduler> plain_engine = bench_engine(in, n, {});
  std::vector<std::unique_ptr<Scheduler>> engines;
  std::vector<SpecOptions> specs;
  for (int K : Ks) {
    SpecOptions so;
    so.drafter = in.drafter;
    so.assistant = in.assistant;
    so.draft_k = K;
    so.mode = in.mode;
    specs.push_back(so);
    engines.push_back(bench_engine(in, n, so));
  }
  for (int K : Ks) {
    SpecRuns s;
    s.K = K;
    s.stats.drafted.assign(K, 0);
    s.stats.accepted.assign(K, 0);
    s.stats.time_module_s.assign(k_max, 0);
    out.spec.push_back(std::move(s));
  }
  for (int r = 0; r < repeat; ++r) {
    go.sampler = in.sampling;
    go.sampler.seed = seed + uint64_t(r);
    double bt = 0, bs = 0;
    std::vector<double> st(Ks.size(), 0), ss(Ks.size(), 0);
    for (size_t p = 0; p < in.prompts.size(); ++p) {
      const auto& ids = in.prompts[p];
      GenerateResult plain = generate(*plain_engine, ids, go);
      bt += generated_steps(plain), bs += plain.timings.gen_s;
      out.plain_total_s += plain.timings.prompt_s + plain.timings.gen_s;
      std::string line = fmt::format("[bench] repeat {}/{}, prompt {}/{}: plain {:.1f} tok/s", r + 1,
                                     repeat, p < in.labels.size() ? in.labels[p] : std::to_string(p + 1),
                                     in.prompts.size(),
                                     rate(generated_steps(plain), plain.timings.gen_s));
      for (size_t i = 0; i < Ks.size(); ++i) {
        GenerateResult sp = generate(*engines[i], ids, go, nullptr, specs[i]);
        out.flips += plain.token_ids != sp.token_ids;
        st[i] += generated_steps(sp), ss[i] += sp.timings.gen_s;
        out.spec[i].total_s += sp.timings.prompt_s + sp.timings.gen_s;
        out.spec[i].stats.add(*sp.stats);
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

std::vector<double> tf_accuracy(const BenchInputs& in,
                                const std::vector<std::vector<int32_t>>& seqs) {
  const int K = in.drafter->config().K;
  std::vector<double> right(size_t(K), 0), rows(size_t(K), 0);
  for (const auto& s : seqs) {
    drafter::TeacherForced tf = drafter::teacher_forced(*in.model, *in.drafter, s, in.pool);
    for (int k = 0; k < K; ++k) {
      right[size_t(k)] += tf.accuracy[size_t(k)] * double(tf.rows[size_t(k)]);
      rows[size_t(k)] += double(tf.rows[size_t(k)]);
    }
  }
  for (int k = 0; k < K; ++k) right[size_t(k)] = rows[size_t(k)] > 0 ? right[size_t(k)] / rows[size_t(k)] : 0;
  return right;
}

BenchResult measure_bench(const BenchInputs& in, int K, int n, int repeat,
                          const std::vector<std::vector<int32_t>>* corpus,
                          const std::string& corpus_note) {
  const model::Model& m = *in.model;
  // 1. Interleaved plain / speculative runs.
  const InterleavedRuns runs = run_interleaved(in, {K}, n, repeat);
  const SpecRuns& sr = runs.spec[0];
  const SpecStats& live = sr.stats;
  BenchResult res;
  res.K = K;
  res.baseline_tok_s = rate(runs.plain_tokens, runs.plain_seconds);
  res.spec_tok_s = rate(sr.tokens, sr.seconds);
  res.speedup = res.baseline_tok_s > 0 ? res.spec_tok_s / res.baseline_tok_s : 0;
  res.spread = spread(sr.speedups);
  res.end_to_end_speedup = sr.total_s > 0 ? runs.plain_total_s / sr.total_s : 0;
  res.acceptance_live = live.acceptance();
  res.tokens_per_cycle = live.tokens_per_cycle();
  res.flips = runs.flips;
  res.target_distinct_2 = distinct_n(runs.plain_out, 2);

  // 2. Teacher-forced accuracy: the target's own outputs, and a corpus.
  res.acceptance_tf_own = tf_accuracy(in, runs.own);
  if (corpus) res.acceptance_tf_corpus = tf_accuracy(in, *corpus);
  else res.acceptance_tf_corpus_note = corpus_note;

  // 3. Costs relative to one decode at a typical context length.
  const int pos = std::min(int(runs.own.empty() ? 64 : runs.own[0].size() / 2 + 1),
                           m.config().max_position - 10);
  std::vector<double> ft = forward_times(m, std::max(1, pos), 8, 9, in.pool);
  for (double x : ft) res.verify_multiplier.push_back(x / ft[0]);
  const double t_dec = ft[0];
  for (double s : live.time_module_s) {
    res.drafter_cost.push_back(live.cycles ? s / double(live.cycles) / t_dec : 0);
  }
  const double c_total = live.cycles ? live.time_draft_s / double(live.cycles) / t_dec : 0;
  const double mk = res.verify_multiplier[std::min<size_t>(size_t(K), res.verify_multiplier.size() - 1)];
  res.predicted_speedup =
      predicted_speedup(expected_tokens_per_cycle(res.acceptance_live), mk, c_total);
  res.break_even = break_even_acceptance(K, mk, c_total);
  res.cycle_cost = mk + c_total;
  res.other_fraction = cycle_cost(live.cycles, live.time_draft_s, live.time_verify_s,
                                  live.time_other_s, 1.0).other_fraction;
  return res;
}

CycleCostResult measure_cycle_cost(const BenchInputs& in, int k_hi, int n, int repeat) {
  std::vector<int> Ks;
  for (int k = 1; k <= k_hi; ++k) Ks.push_back(k);
  const InterleavedRuns runs = run_interleaved(in, Ks, n, repeat);
  CycleCostResult res;
  res.threads = in.pool ? in.pool->size() : 1;
  res.decode_step_s = runs.decode_step_s();
  res.flips = runs.flips;
  for (const SpecRuns& s : runs.spec) {
    const auto& x = s.stats;
    const double module_s = std::accumulate(x.time_module_s.begin(), x.time_module_s.end(), 0.0);
    res.rows.push_back({s.K, cycle_cost(x.cycles, x.time_draft_s, x.time_verify_s,
                                        x.time_other_s, res.decode_step_s),
                        cycle_cost(x.cycles, module_s, 0, 0, res.decode_step_s).draft_rel,
                        x.tokens_per_cycle(), x.acceptance(), x.cycles, rate(s.tokens, s.seconds)});
  }
  return res;
}

std::vector<BenchResult::ByTemperature> measure_temperatures(
    const BenchInputs& in, int K, int n, int repeat, const std::vector<float>& temps,
    const std::vector<SpecSampling>& modes) {
  std::vector<BenchResult::ByTemperature> rows;
  for (float temp : temps) {
    for (size_t m = 0; m < modes.size(); ++m) {
      if (temp == 0.f && m > 0) break;  // greedy: one mode
      BenchInputs at = in;
      at.sampling.temperature = temp;
      at.mode = modes[m];
      at.sampling.validate();
      const InterleavedRuns runs = run_interleaved(at, {K}, n, repeat);
      const SpecRuns& sr = runs.spec[0];
      BenchResult::ByTemperature row;
      row.temperature = temp;
      row.mode = temp == 0.f ? "greedy" : spec_sampling_name(modes[m]);
      row.acceptance = sr.stats.acceptance();
      row.tokens_per_cycle = sr.stats.tokens_per_cycle();
      const double plain = rate(runs.plain_tokens, runs.plain_seconds);
      row.speedup = plain > 0 ? rate(sr.tokens, sr.seconds) / plain : 0;
      row.flips = runs.flips;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

nlohmann::json BenchResult::to_json() const {
  nlohmann::json temps = nlohmann::json::array();
  for (const auto& t : by_temperature) {
    temps.push_back({{"temperature", t.temperature}, {"mode", t.mode},
                     {"acceptance", t.acceptance}, {"tokens_per_cycle", t.tokens_per_cycle},
                     {"speedup", t.speedup}, {"flips", t.flips}});
  }
  return {{"by_temperature", temps},{"baseline_tok_s", baseline_tok_s},
          {"spec_tok_s", spec_tok_s},
          {"speedup", speedup},
          {"speedup_spread", {{"min", spread.min}, {"max", spread.max}, {"stdev", spread.stdev}}},
          {"end_to_end_speedup", end_to_end_speedup},
          {"acceptance_live", acceptance_live},
          {"tokens_per_cycle", tokens_per_cycle},
          {"acceptance_tf_corpus", or_null(acceptance_tf_corpus)},
          {"acceptance_tf_corpus_note", or_null(acceptance_tf_corpus_note)},
          {"acceptance_tf_own", acceptance_tf_own},
          {"verify_multiplier", verify_multiplier},
          {"drafter_cost", drafter_cost},
          {"predicted_speedup", predicted_speedup},
          {"cycle_cost", cycle_cost},
          {"other_fraction", other_fraction},
          {"break_even_acceptance", break_even ? nlohmann::json(*break_even) : nlohmann::json(nullptr)},
          {"draft_k", K},
          {"flips", flips},
          {"target_distinct_2", target_distinct_2}};
}

BenchResult BenchResult::from_json(const nlohmann::json& j) {
  BenchResult r;
  try {
    r.baseline_tok_s = j.at("baseline_tok_s").get<double>();
    r.spec_tok_s = j.at("spec_tok_s").get<double>();
    r.speedup = j.at("speedup").get<double>();
    const auto& sp = j.at("speedup_spread");
    r.spread = {sp.at("min").get<double>(), sp.at("max").get<double>(), sp.at("stdev").get<double>()};
    r.end_to_end_speedup = j.at("end_to_end_speedup").get<double>();
    r.acceptance_live = j.at("acceptance_live").get<std::vector<double>>();
    r.tokens_per_cycle = j.at("tokens_per_cycle").get<double>();
    if (!j.at("acceptance_tf_corpus").is_null()) {
      r.acceptance_tf_corpus = j.at("acceptance_tf_corpus").get<std::vector<double>>();
    }
    if (!j.at("acceptance_tf_corpus_note").is_null()) {
      r.acceptance_tf_corpus_note = j.at("acceptance_tf_corpus_note").get<std::string>();
    }
    r.acceptance_tf_own = j.at("acceptance_tf_own").get<std::vector<double>>();
    r.verify_multiplier = j.at("verify_multiplier").get<std::vector<double>>();
    r.drafter_cost = j.at("drafter_cost").get<std::vector<double>>();
    r.predicted_speedup = j.at("predicted_speedup").get<double>();
    r.cycle_cost = j.at("cycle_cost").get<double>();
    r.other_fraction = j.at("other_fraction").get<double>();
    if (!j.at("break_even_acceptance").is_null()) {
      r.break_even = j.at("break_even_acceptance").get<double>();
    }
    r.K = j.at("draft_k").get<int>();
    r.flips = j.at("flips").get<long>();
    r.target_distinct_2 = j.at("target_distinct_2").get<double>();
    for (const auto& t : j.value("by_temperature", nlohmann::json::array())) {
      r.by_temperature.push_back({t.at("temperature").get<double>(), t.at("mode").get<std::string>(),
                                  t.at("acceptance").get<std::vector<double>>(),
                                  t.at("tokens_per_cycle").get<double>(),
                                  t.at("speedup").get<double>(), t.at("flips").get<long>()});
    }
  } catch (const nlohmann::json::exception& e) {
    fail<FormatError>("not a bench result (the JSON a bench run prints): {}", e.what());
  }
  return r;
}

nlohmann::json CycleCostResult::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& x : rows) {
    out.push_back({{"k", x.k},
                   {"cycle_rel_decode", x.cost.cycle_rel_decode},
                   {"draft_rel", x.cost.draft_rel},
                   {"verify_rel", x.cost.verify_rel},
                   {"other_rel", x.cost.other_rel},
                   {"other_fraction", x.cost.other_fraction},
                   {"draft_forward_rel", x.draft_forward_rel},
                   {"tokens_per_cycle", x.tokens_per_cycle},
                   {"acceptance_live", x.acceptance_live},
                   {"cycles", x.cycles},
                   {"spec_tok_s", x.spec_tok_s}});
  }
  return {{"model", model},
          {"drafter", drafter},
          {"threads", threads},
          {"decode_step_s", decode_step_s},
          {"baseline_tok_s", decode_step_s > 0 ? 1 / decode_step_s : 0},
          {"flips", flips},
          {"cycle_cost", out}};
}

}  // namespace mtp::speculative
