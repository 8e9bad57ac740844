// `mtpspec bench-decode`: one-token decode speed against the bandwidth limit,
// and the verify multiplier m(q) = time(forward of q) / time(forward of 1) at
// the same context length (docs/SEMANTICS.md "Measurement"). Works on any checkpoint
// or on a random target generated in memory (`--random 1b`).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/checks.h"
#include "app/commands.h"
#include "app/common.h"
#include "core/memory_headroom.h"
#include "core/error.h"
#include "core/large_alloc.h"
#include "kernels/bandwidth.h"
#include "kernels/matmul.h"
#include "model/loader.h"
#include "model/random_model.h"
#include "speculative/policy/forward_timing.h"

namespace mtp::app {

namespace {
struct BenchDecodeArgs {
  std::string model, random, weights = "bf16", tied_head = kTiedHeadDefault;
  std::vector<int> threads = {1, 2};
  int pos = 0, q_max = 8, reps = 15;  // pos 0: min(256, half the model's context)
  uint64_t seed = 0;
  bool json = false;
};

// Bytes one decode step reads: the streamed matrices plus, in every layer,
// the K and V it attends over (`pos` earlier positions, at most the window on
// a sliding layer; a layer reading another's K/V reads them again; a
// recurrent layer its state, read and written). The
// token tables give one row each (the per-layer one: n_layers · ple_dim
// values), not counted.
double bytes_per_token(const model::Model& m, int pos) {
  double b = 0;
  for (const auto* x : streamed_matrices(m)) b += double(x->bytes());
  const auto& c = m.config();
  for (int l = 0; l < c.n_layers; ++l) {
    const model::LayerKind k = c.layer_kind(l);
    if (k.recurrent) {  // its state, read and written once
      b += double(c.linear.state_floats()) * 2 * sizeof(float);
      continue;
    }
    const int seen = k.sliding ? std::min(pos, c.sliding_window) : pos;
    b += double(seen) * k.n_kv_heads * k.head_dim * 2 * sizeof(float);
  }
  return b;
}

void run(BenchDecodeArgs a) {
  if (a.model.empty() == a.random.empty()) fail<InputError>("give exactly one of -m MODEL or --random PRESET");
  const std::string simd = kernels::simd_target_description();  // applies MTPSPEC_SIMD
  model::LoadOptions lo;
  lo.weights = parse_hold(a.weights);
  lo.tied_head = model::parse_tied_head(a.tied_head);
  fmt::print(stderr, "loading {} ...\n", a.model.empty() ? "random " + a.random : a.model);
  model::LoadedModel lm = a.model.empty()
      ? model::random_model(model::random_model_preset(a.random),
                            model::resolve_hold(lo.weights, DType::F32), a.seed, lo.tied_head)
      : model::load_model(a.model, lo);
  model::Model m(std::move(lm));
  // The human report: stdout, or stderr under --json (stdout then holds the
  // one JSON object alone).
  std::FILE* report = a.json ? stderr : stdout;
  const auto& c = m.config();
  if (a.pos == 0) a.pos = std::min(256, c.max_position / 2);
  if (a.pos + a.q_max + 1 > c.max_position) fail<InputError>("--pos {} + q-max exceeds the model's context {}", a.pos, c.max_position);
  const double bytes = bytes_per_token(m, a.pos);
  nlohmann::json rows = nlohmann::json::array();
  const std::string held = held_types(m);
  fmt::print(report, "model: {} ({} layers, d {}), matrices held as {}, SIMD {}, huge pages {}, context position {}\n",
             m.loaded().path, c.n_layers, c.d_model, held, simd, huge_pages_description(), a.pos);
  fmt::print(report, "bytes read per decoded token: {:.1f} MB\n", bytes / 1e6);
  const auto& w = m.weights();
  auto table_mb = [](const model::EmbeddingTable& t) {
    return double(t.rows) * double(t.cols) * (t.dtype == DType::F32 ? 4 : 2) / 1e6;
  };
  fmt::print(report, "resident set after load: {:.0f} MB; token table {:.0f} MB{}, head {:.0f} MB "
             "{} (tables are used in place: a checkpoint's stay in its memory map, "
             "resident as rows are read; a random target's per-layer table is never-written "
             "zero pages)\n",
             resident_set_bytes() / 1e6, table_mb(w.embed),
             w.ple_embed.rows ? fmt::format(", per-layer table {:.0f} MB", table_mb(w.ple_embed))
                              : std::string(),
             double(w.lm_head.bytes()) / 1e6,
             !c.tie_embeddings          ? "packed"
             : w.lm_head.is_view() ? "(tied: the token table, read in place)"
                                        : "(tied: a packed copy of the token table)");
  for (int requested : a.threads) {
    const int t = resolve_threads(requested);  // 0: the physical cores
    ThreadPool pool(t);
    const double bw =
        kernels::stream_bandwidth(pool, std::max<size_t>(4 * kernels::llc_bytes(), 256u << 20), 7)
            .median;
    const std::vector<double> times = speculative::forward_times(m, a.pos, a.q_max, a.reps, &pool);
    const double t1 = times[0];
    const double limit = bw / bytes;  // tok/s if every byte streamed at bandwidth
    fmt::print(report, "threads {}: decode {:.2f} ms = {:.1f} tok/s; bandwidth {:.1f} GB/s -> limit {:.1f} "
               "tok/s; decode reaches {:.1f}% of the limit\n",
               t, t1 * 1e3, 1 / t1, bw / 1e9, limit, 100.0 / t1 / limit);
    std::string ms;
    nlohmann::json mult = nlohmann::json::array();
    for (int q = 1; q <= a.q_max; ++q) {
      double mq = times[q - 1] / t1;
      mult.push_back(mq);
      ms += fmt::format(" q{}={:.2f}", q, mq);
    }
    fmt::print(report, "  verify multiplier m(q):{}\n", ms);
    rows.push_back({{"threads", t}, {"decode_s", t1}, {"decode_tok_s", 1 / t1},
                    {"bandwidth_bytes_s", bw}, {"bytes_per_token", bytes},
                    {"limit_tok_s", limit}, {"fraction_of_limit", 1 / t1 / limit},
                    {"verify_multiplier", mult}});
  }
  // Sampling at temperature > 0 (one thread): truncation + keyed noise per
  // kept candidate, relative to this run's 1-thread-or-first decode time.
  nlohmann::json sampling = nlohmann::json::array();
  const double t_dec = rows.empty() ? 0 : rows[0]["decode_s"].get<double>();
  for (const auto& [label, so] : std::vector<std::pair<std::string, speculative::SamplerOptions>>{
           {"T 1, no truncation", {1.f, 0, 1.f, 0.f, 0}},
           {"T 0.8, top-k 40", {0.8f, 40, 1.f, 0.f, 0}},
           {"T 0.8, top-p 0.95", {0.8f, 0, 0.95f, 0.f, 0}},
           {"T 0.8, min-p 0.05", {0.8f, 0, 1.f, 0.05f, 0}}}) {
    const double ts = speculative::sampling_seconds(size_t(c.vocab), so, 41);
    fmt::print(report, "sampling ({}): {:.3f} ms per token = {:.2f}% of a decode\n", label, ts * 1e3,
               t_dec > 0 ? 100 * ts / t_dec : 0.0);
    sampling.push_back({{"setting", label}, {"seconds", ts}, {"fraction_of_decode", t_dec > 0 ? ts / t_dec : 0}});
  }
  fmt::print(report, "resident set after the runs: {:.0f} MB\n", resident_set_bytes() / 1e6);
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"model", m.loaded().path}, {"weights", a.weights}, {"held", held},
                                      {"sampling", sampling},
                                      {"pos", a.pos}, {"simd", kernels::simd_target()},
                                      {"quant_vnni", kernels::simd_quant_vnni()},
                                      {"simd_request", kernels::simd_target_request()},
                                      {"huge_pages", huge_pages_description()},
                                      {"rows", rows}}.dump());
  }
}
}  // namespace

void add_bench_decode(CLI::App& root) {
  auto a = std::make_shared<BenchDecodeArgs>();
  CLI::App* cmd = root.add_subcommand(
      "bench-decode", "Decode speed vs the memory-bandwidth limit, and the verify multiplier m(q)");
  cmd->add_option("-m,--model", a->model, "Target checkpoint (directory or llama2.c .bin)");
  cmd->add_option("--random", a->random,
                  "Or a random target generated in memory: 1b | tiny | gemma4-e2b | qwen35-0.8b | "
                  "qwen35-4b | qwen3-0.6b");
  cmd->add_option("--weights", a->weights,
                  "Precision the matrices are held in: bf16 (default), auto (as stored; a random "
                  "target: fp32), fp32, fp16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (quantized "
                  "in memory; the limit counts quantized bytes)")
      ->check(CLI::IsMember(kWeightTypeNames));
  add_tied_head_flag(cmd, a->tied_head);
  cmd->add_option("--threads", a->threads,
                  "Thread counts to measure: comma-separated and/or repeated (--threads 1,2 or "
                  "--threads 1 --threads 2; 0 = physical cores)")
      ->delimiter(',')
      ->check(cli::NonNegative);
  cmd->add_option("--pos", a->pos,
                  "Context position the forwards run at (default: 256, or half the model's "
                  "context when that is shorter)")
      ->check(cli::NonNegative);
  cmd->add_option("--q-max", a->q_max, "Largest q for the verify multiplier")->check(cli::Range(1, 16));
  cmd->add_option("--reps", a->reps, "Timed repetitions per q (median reported)")->check(cli::Positive);
  cmd->add_option("--random-seed", a->seed, "Seed of the random target (--random)");
  cmd->add_flag("--json", a->json, "Print one JSON object on stdout (the report goes to stderr)");
  cmd->callback([a] { run(*a); });
}

}  // namespace mtp::app
