#include "speculative/policy/forward_timing.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"

namespace mtp::speculative {

std::vector<double> forward_times(const model::Model& m, int pos, int q_max, int reps,
                                  ThreadPool* pool) {
  const auto& c = m.config();
  if (pos + q_max + 1 > c.max_position) {
    fail<InputError>("timing position {} + q {} exceeds the model's context {}", pos, q_max,
                     c.max_position);
  }
  auto kv = m.make_cache(1, pos + q_max + 1, 64);
  std::mt19937 rng(1);
  std::vector<model::Row> rows;
  for (int p = 0; p < pos; ++p) rows.push_back({0, p, int32_t(rng() % c.vocab)});
  for (size_t b = 0; b < rows.size(); b += 64) {
    m.forward(std::span<const model::Row>(rows.data() + b, std::min<size_t>(64, rows.size() - b)),
              kv, {}, pool);
  }
  std::vector<std::vector<double>> t(q_max);
  std::vector<float> logits(size_t(q_max) * c.vocab);
  for (int r = 0; r < reps + 2; ++r) {
    for (int q = 1; q <= q_max; ++q) {
      rows.clear();
      for (int j = 0; j < q; ++j) rows.push_back({0, pos + j, int32_t(rng() % c.vocab)});
      auto t0 = std::chrono::steady_clock::now();
      m.forward(rows, kv, {logits.data(), nullptr, nullptr}, pool);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      kv.truncate(0, pos);
      if (r >= 2) t[q - 1].push_back(s);  // two warm-up rounds
    }
  }
  std::vector<double> med(q_max);
  for (int q = 0; q < q_max; ++q) {
    std::sort(t[q].begin(), t[q].end());
    med[q] = t[q][t[q].size() / 2];
  }
  return med;
}

namespace {
// Seconds at q = 1..q_max from samples at 1, 2 and q_max (each at least the
// one before: more rows never cost less), linear in between; t2 is read only
// when q_max >= 2, tq only when q_max >= 3.
std::vector<double> curve_from(double t1, double t2, double tq, int q_max) {
  std::vector<double> out(size_t(q_max), t1);
  if (q_max == 1) return out;
  t2 = std::max(t1, t2);
  tq = q_max > 2 ? std::max(t2, tq) : t2;
  out[1] = t2;
  for (int q = 3; q <= q_max; ++q) out[size_t(q - 1)] = t2 + (tq - t2) * (q - 2) / double(q_max - 2);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

double sampling_seconds(size_t vocab, const SamplerOptions& o, int reps) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<float> row(vocab);
  for (float& x : row) x = normal(rng);
  Sampler s(o);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile int32_t id = s.sample(row.data(), vocab, int64_t(r));
    (void)id;
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + long(t.size() / 2), t.end());
  return t[t.size() / 2];
}

}  // namespace mtp::speculative
