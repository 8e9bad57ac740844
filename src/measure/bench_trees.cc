#include "measure/bench_trees.h"

#include <fmt/core.h>

#include <optional>
#include <set>

#include "core/error.h"
#include "core/setting.h"
#include "speculative/scheduler/generate.h"

namespace mtp::speculative {

double TreesResult::plain_tok_s() const { return rate(plain_tokens, plain_seconds); }
double TreesResult::tok_s(size_t i) const { return rate(runs[i].tokens, runs[i].seconds); }
double TreesResult::speedup(size_t i) const {
  const double p = plain_tok_s();
  return p > 0 ? tok_s(i) / p : 0;
}

nlohmann::json TreesResult::to_json() const {
  nlohmann::json shapes = nlohmann::json::object();
  for (size_t i = 0; i < runs.size(); ++i) {
    const TreeRun& r = runs[i];
    shapes[r.shape] = {{"tok_s", tok_s(i)},
                       {"speedup", speedup(i)},
                       {"tokens_per_cycle", r.stats.tokens_per_cycle()},
                       {"nodes_per_cycle", r.stats.nodes_per_cycle()},
                       {"flips", r.flips},
                       {"stats", r.stats.to_json()}};
  }
  return {{"draft_k", draft_k},       {"threads", threads},
          {"plain_tok_s", plain_tok_s()}, {"auto_curve", auto_curve},
          {"auto_curve_live", auto_curve_live}, {"shapes", shapes}};
}

TreesResult run_trees(const BenchInputs& in, const std::vector<std::string>& names, int draft_k,
                      int n, int repeat) {
  if (!in.drafter) fail<InputError>("draft trees need a drafter");
  if (names.empty()) fail<InputError>("no tree shape to run");
  std::vector<TreeOptions> shapes;
  for (const std::string& s : names) {
    shapes.push_back(TreeOptions::from_name(s));
    if (shapes.back().kind == TreeOptions::Kind::Static &&
        int(shapes.back().widths.size()) > in.drafter->config().K) {
      fail_setting<InputError>("tree_shapes", "tree shape {}: {} deep; the drafter has K = {} "
                               "modules", s, shapes.back().widths.size(), in.drafter->config().K);
    }
  }
  TreesResult res;
  res.draft_k = draft_k;
  res.threads = in.pool ? int(in.pool->size()) : 1;
  for (const std::string& s : names) res.runs.push_back({s});
  // One engine per shape, kept across prompts and repeats (auto's chooser
  // keeps learning, as in a long-running process): the shape every cycle.
  const std::unique_ptr<Scheduler> plain_engine = bench_engine(in, n, {});
  std::vector<SpecOptions> specs;
  std::vector<std::unique_ptr<Scheduler>> engines;
  for (const TreeOptions& t : shapes) {
    SpecOptions so;
    so.drafter = in.drafter;
    so.draft_k = draft_k;
    so.mode = in.mode;
    so.tree = t;
    engines.push_back(bench_engine(in, n, so));
    specs.push_back(so);
  }
  GenerateOptions go;
  go.n_new = n;
  go.sampler = in.sampling;
  const uint64_t seed = in.sampling.seed;
  const size_t P = in.prompts.size();
  for (int r = 0; r < repeat; ++r) {
    go.sampler.seed = seed + uint64_t(r);
    for (size_t p = 0; p < P; ++p) {
      const auto& ids = in.prompts[p];
      GenerateResult plain = generate(*plain_engine, ids, go);
      res.plain_tokens += generated_steps(plain), res.plain_seconds += plain.timings.gen_s;
      std::string line = fmt::format("[bench] repeat {}/{}, prompt {}/{}: plain {:.1f} tok/s",
                                     r + 1, repeat, p + 1, P, rate(generated_steps(plain), plain.timings.gen_s));
      for (size_t i = 0; i < shapes.size(); ++i) {
        GenerateResult sp = generate(*engines[i], ids, go, nullptr, specs[i]);
        TreeRun& run = res.runs[i];
        run.flips += sp.token_ids != plain.token_ids;
        run.tokens += generated_steps(sp), run.seconds += sp.timings.gen_s;
        if (sp.stats) run.stats.add(*sp.stats);
        line += fmt::format(" | {} {:.1f}", names[i], rate(generated_steps(sp), sp.timings.gen_s));
      }
      fmt::print(stderr, "{}\n", line);
    }
  }
  const TreeChooser* chooser = nullptr;
  for (const auto& e : engines) {
    if (e->tree_chooser()) chooser = e->tree_chooser();
  }
  if (chooser) {
    const CostCurve& c = chooser->curve();
    res.auto_curve = c.points();
    std::set<int> qs;
    for (const auto& [q, s] : c.points()) qs.insert(q);
    for (int q : chooser->verified_rows()) qs.insert(q);
    for (int q : qs) res.auto_curve_live.push_back({q, chooser->verify_seconds(q)});
  }
  return res;
}

}  // namespace mtp::speculative
