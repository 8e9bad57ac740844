#include "measure/bench_sources.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

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

std::vector<std::string> bench_source_names() {
  // The configurations of their own, then every registered source alone.
  std::vector<std::string> names = {"mtp-nogate", "union"};
  for (const auto& [name, help] : draft_sources()) names.push_back(name);
  return names;
}

namespace {
// The engine configuration a --sources name stands for.
SpecOptions source_config(const std::string& s, const BenchInputs& in, const SourceBenchOptions& o) {
  SpecOptions so;
  so.mode = in.mode;
  so.lookup = o.lookup;
  so.gate = o.gate && s != "mtp-nogate";
  if (s == "mtp-nogate") {
    so.sources = {kMtpSource};
  } else if (s == "union") {
    if (in.drafter) so.sources.push_back(kMtpSource);
    so.sources.push_back(kPromptSource);
    so.sources.push_back(kHistorySource);
  } else {
    so.sources = {s};
  }
  if (std::find(so.sources.begin(), so.sources.end(), kMtpSource) != so.sources.end()) {
    so.drafter = in.drafter;
    so.draft_k = o.draft_k;
  }
  if (s == kNativeMtpSource) so.draft_k = o.draft_k;  // the head's chain length
  return so;
}

bool uses(const SpecOptions& so, const char* source) {
  return std::find(so.sources.begin(), so.sources.end(), source) != so.sources.end();
}
}  // namespace

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
  const std::vector<std::string> names = bench_source_names();
  bool needs_history = false, needs_drafter = false;
  for (const std::string& s : o.sources) {
    if (std::find(names.begin(), names.end(), s) == names.end()) {
      fail<InputError>("unknown source configuration '{}' (known: {})", s,
                       fmt::format("{}", fmt::join(names, ", ")));
    }
    needs_history |= s == kHistorySource || s == "union";
    needs_drafter |= s == kMtpSource || s == "mtp-nogate";
  }
  if (needs_drafter && !in.drafter) fail<InputError>("the source mtp needs a drafter");
  if (o.kinds.size() != in.prompts.size()) {
    fail<InputError>("{} prompt kinds for {} prompts", o.kinds.size(), in.prompts.size());
  }
  o.lookup.validate();
  if (!(o.history_mb > 0)) fail<InputError>("the history's size must be > 0 MiB, got {}", o.history_mb);
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
  std::vector<std::pair<int, double>> points;
  for (size_t q = 0; q < res.verify_s.size(); ++q) points.push_back({int(q) + 1, res.verify_s[q]});
  const CostCurve cost(points);

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

  // One engine per configuration across all prompts and repeats, as a
  // process serving many requests keeps it; its history store is prompt p's
  // leave-one-out store for p's runs.
  const std::unique_ptr<Scheduler> plain_engine = bench_engine(in, n, {});
  std::vector<SpecOptions> specs;
  std::vector<std::unique_ptr<Scheduler>> engines;
  const size_t budget = size_t(o.history_mb * double(1 << 20));
  for (const std::string& s : o.sources) {
    SpecOptions so = source_config(s, in, o);
    so.cost = cost;
    if (uses(so, kHistorySource)) so.history = std::make_shared<HistoryStore>(o.lookup.ngram_max, budget);
    engines.push_back(bench_engine(in, n, so));
    specs.push_back(std::move(so));
  }
  const uint64_t seed = in.sampling.seed;
  for (int r = 0; r < repeat; ++r) {
    go.sampler.seed = seed + uint64_t(r);
    for (size_t p = 0; p < P; ++p) {
      const auto& ids = in.prompts[p];
      GenerateResult plain = generate(*plain_engine, ids, go);
      std::string line = fmt::format("[bench] repeat {}/{}, prompt {}/{} ({}): plain {:.1f} tok/s",
                                     r + 1, repeat, p + 1, P, res.kinds[kind_of[p]].kind,
                                     rate(generated_steps(plain), plain.timings.gen_s));
      for (KindRuns* k : {&res.kinds[kind_of[p]], &res.kinds.back()}) {
        k->plain_tokens += generated_steps(plain), k->plain_seconds += plain.timings.gen_s;
      }
      for (size_t i = 0; i < o.sources.size(); ++i) {
        const std::string& s = o.sources[i];
        if (specs[i].history) *specs[i].history = *stores[p];
        GenerateResult sp = generate(*engines[i], ids, go, nullptr, specs[i]);
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
