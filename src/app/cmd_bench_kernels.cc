// `mtpspec bench-kernels`: times the weight kernels (matmul) for q = 1..q_max
// activation rows, per held dtype, shape and thread count, next to the machine's
// read-only streaming bandwidth.
//
// Honesty about memory-boundness: every timed call uses a different packed copy
// of the matrix, cycling through copies that total >= 4x the last-level cache,
// so weights always come from DRAM as in a real decode. The bandwidth probe
// (kernels/bandwidth.h, the one bench-decode uses too) reads a buffer of the
// same >= 4x LLC size. --in-cache instead calls one copy of each matrix
// repeatedly: for a matrix that fits the cache that times the kernels'
// arithmetic alone (unpacking, multiplies), far steadier on a noisy host than
// DRAM-bound timings, and what says whether q = 1 is bound by memory or by
// compute.
// --in-place adds, for the float types, the same values stored row-major and
// read in place (PackedMatrix::view: a tied head over the memory map), timed
// call by call alternately with the packed copies (rows "bf16 in-place").
//
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "app/args.h"
#include "app/commands.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/large_alloc.h"
#include "core/thread_pool.h"
#include "kernels/bandwidth.h"
#include "kernels/matmul.h"

namespace mtp::app {

namespace {

struct BenchArgs {
  bool json = false;
  // Lists: comma-separated and/or given repeatedly (--threads 1 --threads 2).
  std::vector<std::string> threads{"1", "2"}, dtypes{"fp32", "bf16"},
      shapes{"4096x4096", "2048x8192"};
  int q_max = 8, reps = 30;
  bool in_cache = false;
  bool in_place = false;
};

// Row-major storage of `src` in the float hold `dt` (fp32, bf16, fp16), on
// the pages the packed copies get (alloc_large: the kernels compared alone;
// a checkpoint's memory map is on 4 KiB pages — bench-decode measures that).
LargeBuffer row_major(const std::vector<float>& src, kernels::WeightType dt) {
  const bool f32 = dt == kernels::WeightType::F32;
  LargeBuffer out(alloc_large(src.size() * (f32 ? 4 : 2)));
  for (size_t i = 0; i < src.size(); ++i) {
    if (f32) {
      std::memcpy(out.get() + 4 * i, &src[i], 4);
      continue;
    }
    const uint16_t h = dt == kernels::WeightType::BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
    std::memcpy(out.get() + 2 * i, &h, 2);
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

size_t parse_size(const std::string& s, const char* what) {
  try {
    size_t pos = 0;
    long long v = std::stoll(s, &pos);
    if (pos == s.size() && v > 0) return size_t(v);
  } catch (const std::exception&) {
  }
  fail<InputError>("bench-kernels: bad {} '{}' (want a positive integer)", what, s);
}

double now_s() {
  using clk = std::chrono::steady_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string dtype;
  size_t out, in;
  int threads, q;
  double time_s, bytes;
};

void run_bench(const BenchArgs& a) {
  // Applies MTPSPEC_SIMD (throws on a bad value) before anything dispatches,
  // the bandwidth probe included: it runs on the same target as the kernels.
  const std::string target = kernels::simd_target_description();
  std::vector<kernels::WeightType> dtypes;
  for (const auto& s : a.dtypes) {
    dtypes.push_back(kernels::parse_weight_type(s));
  }
  std::vector<std::pair<size_t, size_t>> shapes;
  for (const auto& s : a.shapes) {
    auto p = split(s, 'x');
    if (p.size() != 2) fail<InputError>("bench-kernels: bad shape '{}' (want OUTxIN)", s);
    shapes.emplace_back(parse_size(p[0], "shape"), parse_size(p[1], "shape"));
    // The fp32 source, its packed copy and the activations are held at once.
    const double gb = 2.0 * double(shapes.back().first) * double(shapes.back().second) * 4 / 1e9;
    const double ram = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE)) / 1e9;
    if (ram > 0 && gb > 0.5 * ram) {
      fail<InputError>("bench-kernels: shape '{}' needs about {:.0f} GB (an fp32 source and its "
                       "packed copy); this machine has {:.0f} GB of memory", s, gb, ram);
    }
  }
  std::vector<int> threads;
  for (const auto& s : a.threads) threads.push_back(int(parse_size(s, "thread count")));
  if (a.q_max < 1 || a.reps < 1) fail<InputError>("bench-kernels: --q-max and --reps must be >= 1");
  if (dtypes.empty() || shapes.empty() || threads.empty())
    fail<InputError>("bench-kernels: empty --dtype, --shapes or --threads list");

  const size_t llc = kernels::llc_bytes(), footprint = 4 * llc;
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int t : threads) pools.push_back(std::make_unique<ThreadPool>(resolve_threads(t)));

  // Streaming bandwidth per thread count.
  std::vector<kernels::Bandwidth> bws(threads.size());
  std::vector<double> bw(threads.size());  // medians
  for (size_t k = 0; k < threads.size(); ++k) {
    bws[k] = kernels::stream_bandwidth(*pools[k], footprint, std::max(5, a.reps / 3));
    bw[k] = bws[k].median;
  }
  if (!a.json) {
    const std::string layout =
        a.in_cache ? "one copy of each matrix, called repeatedly (--in-cache: %bw compares with "
                     "the DRAM stream)"
                   : fmt::format("matrices cycled over >= {} MiB", footprint >> 20);
    fmt::print("SIMD target {}; huge pages {}; LLC {} MiB; {}\n", target, huge_pages_description(),
               llc >> 20, layout);
    for (size_t k = 0; k < threads.size(); ++k)
      fmt::print("read bandwidth, {} thread(s): {:.1f} GB/s (best pass {:.1f})\n", threads[k],
                 bws[k].median / 1e9, bws[k].best / 1e9);
    // time/vs_q1/GB/s/%bw from medians; min/vs_q1 of the fastest call, which
    // is less disturbed by other load on a shared machine.
    fmt::print("\n{:>5} {:>10} {:>3} {:>3} {:>9} {:>6} {:>8} {:>5} {:>9} {:>6}\n", "dtype",
               "shape", "thr", "q", "time_ms", "vs_q1", "GB/s", "%bw", "min_ms", "vs_q1");
  }

  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 0.02f);
  std::vector<Row> rows;
  for (auto dt : dtypes) {
    for (auto [out, in] : shapes) {
      std::vector<float> src(out * in);
      for (auto& v : src) v = nd(rng);
      auto first = kernels::PackedMatrix::pack(src.data(), DType::F32, out, in, dt);
      const size_t n_mats =
          a.in_cache ? 1 : std::max<size_t>(2, (footprint + first.bytes() - 1) / first.bytes());
      if (a.in_cache && first.bytes() > llc / 2)
        fmt::print(stderr,
                   "bench-kernels: --in-cache: a {:.1f} MiB {} {}x{} matrix does not fit half the "
                   "{} MiB last-level cache; its timings are DRAM-bound anyway\n",
                   double(first.bytes()) / (1 << 20), kernels::weight_type_name(dt), out, in,
                   llc >> 20);
      std::vector<kernels::PackedMatrix> mats{first};
      while (mats.size() < n_mats)
        mats.push_back(kernels::PackedMatrix::pack(src.data(), DType::F32, out, in, dt));
      // In place: as many row-major copies, each a view (float types only).
      std::vector<LargeBuffer> stores;
      std::vector<kernels::PackedMatrix> views;
      if (a.in_place && !kernels::weight_type_quantized(dt))
        while (views.size() < n_mats) {
          stores.push_back(row_major(src, dt));
          views.push_back(kernels::PackedMatrix::view(stores.back().get(),
                                                      kernels::weight_ggml_type(dt), out, in,
                                                      nullptr));
        }
      std::vector<float> x(size_t(a.q_max) * in), y(size_t(a.q_max) * out);
      for (auto& v : x) v = nd(rng) * 50;
      for (size_t k = 0; k < threads.size(); ++k) {
        // q values interleaved call by call so that bandwidth drifts of the
        // shared machine hit every q alike; each call uses the next matrix.
        // times[layout][q - 1]: layout 0 the packed copies, 1 the views,
        // timed alternately call by call.
        std::vector<std::vector<double>> times[2] = {std::vector<std::vector<double>>(size_t(a.q_max)),
                                                     std::vector<std::vector<double>>(size_t(a.q_max))};
        const size_t n_layouts = views.empty() ? 1 : 2;
        size_t m = 0;
        for (int r = -1; r < a.reps; ++r) {  // r = -1: warm-up lap
          for (int q = 1; q <= a.q_max; ++q) {
            for (size_t lap = 0; lap < (r < 0 ? n_mats : 1); ++lap, ++m) {
              for (size_t l = 0; l < n_layouts; ++l) {
                const auto& w = (l == 0 ? mats : views)[m % n_mats];
                double t0 = now_s();
                kernels::matmul(w, x.data(), size_t(q), y.data(), pools[k].get());
                double t = now_s() - t0;
                if (r >= 0) times[l][q - 1].push_back(t);
              }
            }
          }
        }
        for (size_t l = 0; l < n_layouts; ++l) {
          const auto& tl = times[l];
          const double t1 = median(tl[0]), t1min = *std::min_element(tl[0].begin(), tl[0].end());
          const std::string name =
              std::string(kernels::weight_type_name(dt)) + (l == 1 ? " in-place" : "");
          for (int q = 1; q <= a.q_max; ++q) {
            Row row{name, out, in, threads[k], q, median(tl[q - 1]), double(first.bytes())};
            rows.push_back(row);
            if (!a.json) {
              const double gbs = row.bytes / row.time_s / 1e9;
              const double tmin = *std::min_element(tl[q - 1].begin(), tl[q - 1].end());
              fmt::print("{:>5} {:>10} {:>3} {:>3} {:>9.3f} {:>6.2f} {:>8.1f} {:>4.0f}% {:>9.3f} "
                         "{:>6.2f}\n",
                         row.dtype, fmt::format("{}x{}", out, in), row.threads, q,
                         row.time_s * 1e3, row.time_s / t1, gbs, 100 * gbs * 1e9 / bw[k],
                         tmin * 1e3, tmin / t1min);
            }
          }
        }
        std::fflush(stdout);
      }
    }
  }
  if (a.json) {
    nlohmann::json j;
    j["rows"] = nlohmann::json::array();
    for (const auto& r : rows)
      j["rows"].push_back({{"dtype", r.dtype},
                           {"shape", {r.out, r.in}},
                           {"threads", r.threads},
                           {"q", r.q},
                           {"time_s", r.time_s}});
    j["stream_bandwidth"] = nlohmann::json::array();
    for (size_t k = 0; k < threads.size(); ++k)
      j["stream_bandwidth"].push_back({{"threads", threads[k]}, {"bytes_per_s", bw[k]}});
    j["simd_target"] = kernels::simd_target();
    j["simd_request"] = kernels::simd_target_request();  // "" = automatic
    j["quant_vnni"] = kernels::simd_quant_vnni();
    j["huge_pages"] = huge_pages_description();
    j["llc_bytes"] = llc;
    j["in_cache"] = a.in_cache;
    fmt::print("{}\n", j.dump());
  }
}

}  // namespace

void add_bench_kernels(CLI::App& root) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = root.add_subcommand(
      "bench-kernels", "Time the matmul kernels for q = 1..q-max rows against streaming bandwidth");
  cmd->add_flag("--json", a->json,
                "Print {\"rows\": [{dtype, shape: [out, in], threads, q, time_s}]} (median "
                "seconds per call) instead of the table");
  cmd->add_option("--threads", a->threads, "Thread counts to run (comma-separated or repeated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--q-max", a->q_max, "Time q = 1..N activation rows per call")
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtypes, "Held weight types: fp32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k "
                  "(comma-separated; GB/s counts the held bytes)")
      ->delimiter(',')
      ->check(CLI::IsMember([] {  // the held types: every --weights name but "auto"
        std::vector<std::string> held;
        for (const auto& n : kWeightTypeNames) if (n != "auto") held.push_back(n);
        return held;
      }()))
      ->capture_default_str();
  cmd->add_option("--shapes", a->shapes, "Weight shapes OUTxIN (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--reps", a->reps, "Timed calls per (dtype, shape, threads, q); median reported")
      ->capture_default_str();
  cmd->add_flag("--in-cache", a->in_cache,
                "Call one copy of each matrix repeatedly instead of cycling copies over >= 4x the "
                "last-level cache: for a matrix that fits the cache (e.g. 256x4096), the kernels' "
                "arithmetic cost without DRAM");
  cmd->add_flag("--in-place", a->in_place,
                "Also time the float types stored row-major and read in place (a tied head over "
                "the memory map; PackedMatrix::view), alternating call by call with the packed "
                "copies");
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace mtp::app
