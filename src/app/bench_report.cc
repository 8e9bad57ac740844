#include "app/bench_report.h"

#include <fmt/core.h>

#include <numeric>

#include "app/spec_common.h"
#include "core/mapped_file.h"

namespace mtp::app {

namespace {
std::string list(const std::vector<double>& v, int digits = 3) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:.{}f}", i ? ", " : "", v[i], digits);
  return "[" + s + "]";
}
double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}
}  // namespace

void print_bench(const BenchResult& r, std::FILE* out) {
  fmt::print(out, "plain {:.1f} tok/s | speculative {:.1f} tok/s | speedup {:.3f} (min {:.3f}, max {:.3f}, stdev {:.3f})\n",
             r.baseline_tok_s, r.spec_tok_s, r.speedup, r.spread.min, r.spread.max, r.spread.stdev);
  fmt::print(out, "end to end (prompt processing included, drafter's share of it too): speedup {:.3f}\n",
             r.end_to_end_speedup);
  fmt::print(out, "drafting: K = {} drafts every cycle (not gated; generate's default skips a drafter "
                  "below break-even: bench --sources mtp,mtp-nogate measures both)\n", r.K);
  fmt::print(out, "outputs differing from plain: {} (must be 0)\n", r.flips);
  fmt::print(out, "target output diversity: distinct-2 {:.3f} (a repetitive target inflates acceptance)\n",
             r.target_distinct_2);
  fmt::print(out, "acceptance live by position: {} | tokens/cycle {:.2f}\n", list(r.acceptance_live),
             r.tokens_per_cycle);
  fmt::print(out, "teacher-forced accuracy, target's own outputs: {} (gap to live, module 0: {:+.3f})\n",
             list(r.acceptance_tf_own),
             r.acceptance_tf_own.empty() || r.acceptance_live.empty() ? 0.0 : r.acceptance_tf_own[0] - r.acceptance_live[0]);
  if (!r.acceptance_tf_corpus.empty()) {
    fmt::print(out, "teacher-forced accuracy, corpus: {} (gap to live, module 0: {:+.3f})\n",
               list(r.acceptance_tf_corpus), r.acceptance_tf_corpus[0] - (r.acceptance_live.empty() ? 0 : r.acceptance_live[0]));
  } else {
    fmt::print(out, "teacher-forced accuracy, corpus: not measured ({})\n", r.acceptance_tf_corpus_note);
  }
  fmt::print(out, "verify multiplier m(q), q = 1..{}: {}\n", r.verify_multiplier.size(), list(r.verify_multiplier, 2));
  fmt::print(out, "drafter cost per cycle by module (decode = 1, catch-up included): {}\n", list(r.drafter_cost, 3));
  fmt::print(out, "cycle cost {:.3f} decodes; predicted speedup {:.3f} vs measured {:.3f}; loop overhead {:.1f}% of a cycle\n",
             r.cycle_cost, r.predicted_speedup, r.speedup, 100 * r.other_fraction);
  if (r.break_even) {
    fmt::print(out, "break-even acceptance (same at every position, K = {}): {:.3f}\n", r.K, *r.break_even);
  } else {
    fmt::print(out, "break-even acceptance: none — even perfect drafts cannot pay for a cycle\n");
  }
  if (!r.by_temperature.empty()) {
    fmt::print(out, "by temperature (K = {}):\n", r.K);
    for (const auto& t : r.by_temperature) {
      fmt::print(out, "  T {:.2f} {:<9} acceptance {} | tokens/cycle {:.2f} | speedup {:.3f} | "
                      "outputs differing from plain {}{}\n",
                 t.temperature, t.mode, list(t.acceptance), t.tokens_per_cycle, t.speedup, t.flips,
                 t.mode == "rejection" ? " (another sample: expected)" : " (must be 0)");
    }
  }
}

void write_bench_report(const BenchResult& r, const std::string& path, const std::string& model,
                        const std::string& held, const std::string& drafter) {
  std::string s = fmt::format("# mtpspec bench\n\nmodel `{}` (matrices held as {}), drafter `{}`, K = {}\n\n",
                              model, held, drafter, r.K);
  s += "| measure | value |\n|---|---|\n";
  s += fmt::format("| plain tok/s | {:.1f} |\n| speculative tok/s | {:.1f} |\n", r.baseline_tok_s, r.spec_tok_s);
  s += fmt::format("| speedup, end to end (prompt processing included) | {:.3f} |\n",
                   r.end_to_end_speedup);
  s += fmt::format("| speedup (min / max / stdev) | {:.3f} ({:.3f} / {:.3f} / {:.3f}) |\n", r.speedup,
                   r.spread.min, r.spread.max, r.spread.stdev);
  s += fmt::format("| outputs differing from plain | {} |\n", r.flips);
  s += fmt::format("| target output distinct-2 | {:.3f} |\n", r.target_distinct_2);
  s += fmt::format("| live acceptance by position | {} |\n", list(r.acceptance_live));
  s += fmt::format("| tokens per cycle | {:.2f} |\n", r.tokens_per_cycle);
  s += fmt::format("| teacher-forced accuracy, own outputs | {} |\n", list(r.acceptance_tf_own));
  if (!r.acceptance_tf_corpus.empty()) {
    s += fmt::format("| teacher-forced accuracy, corpus | {} |\n", list(r.acceptance_tf_corpus));
  }
  s += fmt::format("| verify multiplier m(q) | {} |\n", list(r.verify_multiplier, 2));
  s += fmt::format("| drafter cost per cycle by module | {} |\n", list(r.drafter_cost));
  s += fmt::format("| predicted speedup | {:.3f} |\n", r.predicted_speedup);
  s += fmt::format("| break-even acceptance | {} |\n", r.break_even ? fmt::format("{:.3f}", *r.break_even) : "none");
  if (!r.by_temperature.empty()) {
    s += "\n## By temperature\n\n| temperature | mode | acceptance | tokens/cycle | speedup | "
         "outputs differing |\n|---|---|---|---|---|---|\n";
    for (const auto& t : r.by_temperature) {
      s += fmt::format("| {:.2f} | {} | {} | {:.2f} | {:.3f} | {} |\n", t.temperature, t.mode,
                       list(t.acceptance), t.tokens_per_cycle, t.speedup, t.flips);
    }
  }
  write_file_atomic(path, s);
}

void write_bench_plot(const BenchResult& r, const std::string& path) {
  const double W = 560, H = 360, L = 60, B = 40, T = 20, R = 20;
  const double m = r.cycle_cost > 0 ? r.cycle_cost : 1;
  auto pred = [&](double p) {
    return speculative::expected_tokens_per_cycle(std::vector<double>(r.K, p)) / m;
  };
  const double ymax = std::max({pred(1.0), r.speedup, 1.2}) * 1.1;
  auto X = [&](double p) { return L + p * (W - L - R); };
  auto Y = [&](double v) { return H - B - v / ymax * (H - B - T); };
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n", W, H);
  svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", L, H - B, W - R, H - B);
  svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", L, T, L, H - B);
  for (int i = 0; i <= 10; i += 2) {
    svg += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{:.1f}</text>\n", X(i / 10.0), H - B + 16, i / 10.0);
  }
  for (double v = 0; v <= ymax; v += 0.5) {
    svg += fmt::format("<text x='{}' y='{}' text-anchor='end'>{:.1f}</text>\n", L - 6, Y(v) + 4, v);
  }
  std::string pts;
  for (int i = 0; i <= 100; ++i) pts += fmt::format("{:.1f},{:.1f} ", X(i / 100.0), Y(pred(i / 100.0)));
  svg += fmt::format("<polyline points='{}' fill='none' stroke='steelblue' stroke-width='2'/>\n", pts);
  svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='gray' stroke-dasharray='4'/>\n", L, Y(1), W - R, Y(1));
  if (r.break_even) {
    svg += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='gray' stroke-dasharray='2'/>\n",
                       X(*r.break_even), T, H - B);
    svg += fmt::format("<text x='{}' y='{}'>break-even {:.2f}</text>\n", X(*r.break_even) + 4, T + 12, *r.break_even);
  }
  const double acc = mean(r.acceptance_live);
  svg += fmt::format("<circle cx='{}' cy='{}' r='5' fill='crimson'/>\n", X(acc), Y(r.speedup));
  svg += fmt::format("<text x='{}' y='{}'>measured ({:.2f}, {:.2f}x)</text>\n", X(acc) + 8, Y(r.speedup) - 6, acc, r.speedup);
  svg += fmt::format("<text x='{}' y='{}' text-anchor='middle'>acceptance (same at every position)</text>\n", (L + W - R) / 2, H - 6);
  svg += fmt::format("<text x='14' y='{}' transform='rotate(-90 14 {})' text-anchor='middle'>speedup (predicted, K = {})</text>\n",
                     (T + H - B) / 2, (T + H - B) / 2, r.K);
  svg += "</svg>\n";
  write_file_atomic(path, svg);
}

void print_cycle_cost(const CycleCostResult& r, std::FILE* out) {
  fmt::print(out, "cycle cost relative to one plain decode step ({:.3f} ms, {:.1f} tok/s; {} thread(s))\n",
             1e3 * r.decode_step_s, r.decode_step_s > 0 ? 1 / r.decode_step_s : 0, r.threads);
  fmt::print(out, "model {}, drafter {}\n", r.model, r.drafter);
  fmt::print(out, "| K | cycle | draft (module forwards) | forwards / draft step | verify | other | other % of cycle | tokens/cycle | live acceptance per position | cycles |\n"
                  "|---|---|---|---|---|---|---|---|---|---|\n");
  bool under = true;
  for (const auto& x : r.rows) {
    const auto& c = x.cost;
    under = under && c.other_fraction < 0.05;
    std::string acc;
    for (double v : x.acceptance_live) acc += fmt::format("{}{:.3f}", acc.empty() ? "" : " ", v);
    fmt::print(out, "| {} | {:.3f} | {:.3f} ({:.3f}) | {:.4f} | {:.3f} | {:.5f} | {:.3f} % | {:.2f} | {} | {} |\n",
               x.k, c.cycle_rel_decode, c.draft_rel, x.draft_forward_rel,
               x.draft_forward_rel / double(x.k), c.verify_rel, c.other_rel,
               100 * c.other_fraction, x.tokens_per_cycle, acc, x.cycles);
  }
  fmt::print(out, "outputs differing from plain: {} (must be 0)\n", r.flips);
  fmt::print(out, "loop overhead (other) under 5 % of a cycle at every K: {}\n", under ? "yes" : "NO");
}

void print_sources(const speculative::SourcesResult& r, std::FILE* out) {
  std::string m;
  for (size_t q = 0; q < r.verify_s.size(); ++q) {
    m += fmt::format("{}{:.2f}", q ? " " : "", r.verify_s[q] / r.verify_s[0]);
  }
  fmt::print(out, "verify cost m(q), q = 1..{}: {} (one decode {:.3f} ms, {} threads)\n",
             r.verify_s.size(), m, 1e3 * r.verify_s[0], r.threads);
  for (const auto& k : r.kinds) {
    fmt::print(out, "\n### {} ({} prompts): plain {:.1f} tok/s\n\n", k.kind, k.prompts,
               k.plain_tok_s());
    fmt::print(out, "| source | tokens/cycle | tok/s | speedup | flips | chosen (probes) per source |\n");
    fmt::print(out, "|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < k.runs.size(); ++i) {
      const auto& run = k.runs[i];
      std::string chosen;
      for (const auto& [name, c] : run.stats.sources) {
        chosen += fmt::format("{}{} {} ({})", chosen.empty() ? "" : ", ", name, c.chosen, c.probes);
      }
      fmt::print(out, "| {} | {:.2f} | {:.1f} | {:.2f} | {} | {} |\n", run.source,
                 run.stats.tokens_per_cycle(), run.seconds > 0 ? run.tokens / run.seconds : 0,
                 k.speedup(i), run.flips, chosen);
    }
    // Each run's sources: what they proposed, what was verified and accepted
    // (by draft position) and the time they took (drafting, lookups, catch-up).
    fmt::print(out, "\n| run | source | chosen (probes) | proposed | verified | accepted | "
                    "acceptance by position | time (ms) |\n");
    fmt::print(out, "|---|---|---|---|---|---|---|---|\n");
    for (const auto& run : k.runs) {
      for (const auto& [name, c] : run.stats.sources) {
        fmt::print(out, "| {} | {} | {} ({}) | {} | {} | {} | {} | {:.1f} |\n", run.source, name,
                   c.chosen, c.probes, c.proposed, c.verified(), c.accepted_total(),
                   acceptance_by_position(c), 1e3 * c.time_s);
      }
    }
  }
}

void print_trees(const speculative::TreesResult& r, std::FILE* out) {
  fmt::print(out, "\ndraft trees, draft length {}, {} threads: plain {:.1f} tok/s\n\n", r.draft_k,
             r.threads, r.plain_tok_s());
  if (!r.auto_curve.empty()) {
    std::string m;
    for (const auto& [q, s] : r.auto_curve) {
      m += fmt::format("{}{}: {:.2f}", m.empty() ? "" : ", ", q, s / r.auto_curve[0].second);
    }
    fmt::print(out, "auto's m(q), timed: {}\n", m);
    m.clear();
    for (const auto& [q, s] : r.auto_curve_live) {
      m += fmt::format("{}{}: {:.2f}", m.empty() ? "" : ", ", q, s / r.auto_curve[0].second);
    }
    fmt::print(out, "auto's m(q), in its cycles at the end: {}\n\n", m);
  }
  fmt::print(out, "| shape | tokens/cycle | nodes/cycle | tok/s | speedup | flips | cycles by accepted "
                  "length | shapes chosen |\n");
  fmt::print(out, "|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const auto& run = r.runs[i];
    std::string hist, chosen;
    for (size_t a = 0; a < run.stats.accepted_length_hist.size(); ++a) {
      hist += fmt::format("{}{}", a ? " " : "", run.stats.accepted_length_hist[a]);
    }
    for (const auto& [shape, n] : run.stats.tree_shapes) {
      chosen += fmt::format("{}{} x{}", chosen.empty() ? "" : ", ", shape, n);
    }
    fmt::print(out, "| {} | {:.2f} | {:.2f} | {:.1f} | {:.3f} | {} | {} | {} |\n", run.shape,
               run.stats.tokens_per_cycle(), run.stats.nodes_per_cycle(), r.tok_s(i), r.speedup(i),
               run.flips, hist, chosen);
  }
}

}  // namespace mtp::app
