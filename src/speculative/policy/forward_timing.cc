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

std::vector<double> session_forward_times(TargetSession& s, int q_max) {
  const int n = s.forwarded();
  q_max = std::max(1, std::min(q_max, s.ctx() - n));
  const int32_t tok = 0;
  std::vector<int32_t> tokens(size_t(q_max), tok);
  std::vector<float> logits(size_t(q_max) * size_t(s.model().config().vocab));
  auto time_q = [&](int q) {
    const auto t0 = std::chrono::steady_clock::now();
    s.forward(std::span<const int32_t>(tokens.data(), size_t(q)), logits.data());
    const double sec = seconds_since(t0);
    s.truncate(n);
    return sec;
  };
  const double t1 = time_q(1);
  const double t2 = q_max > 1 ? time_q(2) : 0.0;
  return curve_from(t1, t2, q_max > 2 ? time_q(q_max) : 0.0, q_max);
}

std::vector<double> prefill_timed(TargetSession& s, std::span<const int32_t> prompt, int q_max,
                                  float* last_logits) {
  // Timed tail: q_max rows (when > 2), then 2, then 1 (the last prompt row).
  const size_t tail = size_t(q_max > 2 ? q_max : 0) + (q_max > 1 ? 2 : 0) + 1;
  if (q_max < 1 || q_max > s.q_max() || prompt.size() < size_t(q_max) + 4) {
    s.prefill(prompt, last_logits);
    return {};
  }
  const size_t V = s.model().config().vocab;
  s.prefill(prompt.first(prompt.size() - tail), nullptr);
  std::vector<float> logits(size_t(q_max) * V);
  size_t at = prompt.size() - tail;
  auto time_q = [&](int q) {
    const auto t0 = std::chrono::steady_clock::now();
    s.forward(prompt.subspan(at, size_t(q)), logits.data());
    at += size_t(q);
    return seconds_since(t0);
  };
  const double tq = q_max > 2 ? time_q(q_max) : 0.0;
  const double t2 = q_max > 1 ? time_q(2) : 0.0;
  const double t1 = time_q(1);  // the last prompt row: its logits are the answer
  MTP_CHECK(at == prompt.size(), "timed prefill ended at row {} of {}", at, prompt.size());
  if (last_logits) std::copy_n(logits.data(), V, last_logits);
  return curve_from(t1, t2, tq, q_max);
}

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
