#include "measure/bench_sources.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "core/error.h"
#include "speculative/policy/forward_timing.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/history.h"

namespace mtp::speculative {

double KindRuns::plain_tok_s() const { return rate(plain_tokens, plain_seconds); }

double KindRuns::speedup(size_t i) const {
  const double p = plain_tok_s();
  return p > 0 ? rate(runs[i].tokens, runs[i].seconds) / p : 0;
}

const std::vector<std::string>& bench_source_names() {
  static const std::vector<std::string> names = {"mtp", "mtp-nogate", "prompt", "history", "union"};
  return names;
}

nlohmann::json SourcesResult::to_json() const {
  nlohmann::json k = nlohmann::json::object();
  for (const KindRuns& kr : kinds) {
    nlohmann::json src = nlohmann::json::object();
    for (size_t i = 0; i < kr.runs.size(); ++i) {
      const SourceRun& r = kr.runs[i];
      src[r.source] = {{"tok_s", rate(r.tokens, r.seconds)}, {"speedup", kr.speedup(i)},
                       {"tokens_per_cycle", r.stats.tokens_per_cycle()}, {"flips", r.flips},
                       {"stats", r.stats.to_json()}};
    }
    k[kr.kind] = {{"prompts", kr.prompts}, {"plain_tok_s", kr.plain_tok_s()}, {"sources", src}};
  }
  return {{"verify_s", verify_s}, {"threads", threads}, {"kinds", k}};
}

SourcesResult run_sources(const BenchInputs& in, const SourceBenchOptions& o, int n, int repeat) {
  const auto& names = bench_source_names();
  bool needs_history = false, needs_drafter = false;
  for (const std::string& s : o.sources) {
    if (std::find(names.begin(), names.end(), s) == names.end()) {
      fail<InputError>("--sources: unknown source '{}' (known: mtp, mtp-nogate, prompt, history, "
                       "union)", s);
    }
    needs_history |= s == "history" || s == "union";
    needs_drafter |= s == "mtp" || s == "mtp-nogate";
  }
  if (needs_drafter && !in.drafter) fail<InputError>("--sources mtp needs a drafter");
  if (o.kinds.size() != in.prompts.size()) {
    fail<InputError>("{} prompt kinds for {} prompts", o.kinds.size(), in.prompts.size());
  }
  o.lookup.validate();
  if (!(o.history_mb > 0)) fail<InputError>("--history-mb must be > 0, got {}", o.history_mb);
  const size_t P = in.prompts.size();
  GenerateOptions go;
  go.n_new = n;
  go.sampler = in.sampling;

  // Kinds, in order of first appearance; "all" last.
  SourcesResult res;
  res.threads = in.pool ? int(in.pool->size()) : 1;
  std::vector<size_t> kind_of(P);
  for (size_t p = 0; p < P; ++p) {
    const std::string k = o.kinds[p].empty() ? "free" : o.kinds[p];
    auto it = std::find_if(res.kinds.begin(), res.kinds.end(), [&](const KindRuns& x) { return x.kind == k; });
    if (it == res.kinds.end()) {
      res.kinds.push_back({k});
      it = res.kinds.end() - 1;
    }
    kind_of[p] = size_t(it - res.kinds.begin());
    ++it->prompts;
  }
  res.kinds.push_back({"all", int(P)});
  for (KindRuns& k : res.kinds) {
    for (const std::string& s : o.sources) k.runs.push_back({s});
  }

  // The verify cost curve, timed once.
  const int loop_k = std::max(o.lookup.max_draft, in.drafter ? in.drafter->config().K : 0);
  double mean_len = 0;
  for (const auto& p : in.prompts) mean_len += double(p.size()) / double(P);
  const int pos = std::clamp(int(mean_len) + n / 2, 1, in.model->config().max_position - loop_k - 2);
  res.verify_s = forward_times(*in.model, pos, loop_k + 1, 3, in.pool);
  const CostModel cost = CostModel::from_times(res.verify_s);

  // History: leave-one-out datastores from an untimed plain pass.
  std::vector<std::unique_ptr<HistoryStore>> stores(P);
  if (needs_history) {
    std::vector<std::vector<int32_t>> outputs(P);
    for (size_t p = 0; p < P; ++p) {
      GenerateResult r = generate(*in.model, in.tokenizer, in.prompts[p], go, in.pool);
      outputs[p] = in.prompts[p];
      outputs[p].insert(outputs[p].end(), r.token_ids.begin(), r.token_ids.end());
    }
    const size_t budget = size_t(o.history_mb * double(1 << 20));
    for (size_t p = 0; p < P; ++p) {
      stores[p] = std::make_unique<HistoryStore>(o.lookup.ngram_max, budget);
      for (const auto& d : o.corpus) stores[p]->add(d);
      for (size_t q = 0; q < P; ++q) {
        if (q != p) stores[p]->add(outputs[q]);
      }
    }
  }

  // One gate per source across all prompts and repeats (gate.h GateMemory),
  // as a process serving many requests keeps it.
  std::vector<GateMemory> gates(o.sources.size());
  const uint64_t seed = in.sampling.seed;
  for (int r = 0; r < repeat; ++r) {
    go.sampler.seed = seed + uint64_t(r);
    for (size_t p = 0; p < P; ++p) {
      const auto& ids = in.prompts[p];
      GenerateResult plain = generate(*in.model, in.tokenizer, ids, go, in.pool);
      std::string line = fmt::format("[bench] repeat {}/{}, prompt {}/{} ({}): plain {:.1f} tok/s",
                                     r + 1, repeat, p + 1, P, res.kinds[kind_of[p]].kind,
                                     rate(generated_steps(plain), plain.timings.gen_s));
      for (KindRuns* k : {&res.kinds[kind_of[p]], &res.kinds.back()}) {
        k->plain_tokens += generated_steps(plain), k->plain_seconds += plain.timings.gen_s;
      }
      for (size_t i = 0; i < o.sources.size(); ++i) {
        const std::string& s = o.sources[i];
        SpecOptions so;
        so.mode = in.mode;
        so.cost = cost;
        so.lookup = o.lookup;
        so.gate = o.gate && s != "mtp-nogate";
        so.gate_memory = &gates[i];
        if (s == "mtp" || s == "mtp-nogate" || (s == "union" && in.drafter)) {
          so.drafter = in.drafter;
          so.draft_k = o.draft_k;
        }
        so.lookup_prompt = s == "prompt" || s == "union";
        if (s == "history" || s == "union") so.history = stores[p].get();
        GenerateResult sp = generate(*in.model, in.tokenizer, ids, go, in.pool, nullptr, so);
        for (KindRuns* k : {&res.kinds[kind_of[p]], &res.kinds.back()}) {
          SourceRun& run = k->runs[i];
          run.flips += sp.token_ids != plain.token_ids;
          run.tokens += generated_steps(sp), run.seconds += sp.timings.gen_s;
          if (sp.stats) run.stats.add(*sp.stats);
        }
        line += fmt::format(" | {} {:.1f}", s, rate(generated_steps(sp), sp.timings.gen_s));
      }
      fmt::print(stderr, "{}\n", line);
    }
  }
  return res;
}

}  // namespace mtp::speculative
