#include "bit_exact.h"

#include <gtest/gtest.h>

#include <random>

#include "model_util.h"

namespace mtp::test {

namespace {
// Rows [b, e) of a [n, width] buffer.
std::vector<float> rows_of(const std::vector<float>& v, size_t width, size_t b, size_t e) {
  return std::vector<float>(v.begin() + b * width, v.begin() + e * width);
}
}  // namespace

void check_bit_exact(const model::Model& m, int threads, unsigned seed, int n_tokens) {
  const auto& c = m.config();
  const size_t V = c.vocab, d = c.d_model;
  ThreadPool pool(threads);
  ThreadPool* p = threads > 1 ? &pool : nullptr;
  std::mt19937 rng(seed);
  const int ctx = n_tokens + 40;
  auto tokens = random_tokens(rng, n_tokens, c.vocab);

  // (1) Reference: one token per call.
  auto kv_ref = m.make_cache(1, ctx, 16);
  RowOutputs ref = run_chunks(m, kv_ref, 0, tokens, {1}, p);

  // (2) Every q from 2 to 16 as the chunk size.
  for (int q = 2; q <= 16; ++q) {
    auto kv = m.make_cache(1, ctx, 16);
    RowOutputs got = run_chunks(m, kv, 0, tokens, {q}, p);
    ASSERT_EQ(first_bit_difference(ref.logits, got.logits), -1) << "logits differ, q=" << q;
    ASSERT_EQ(first_bit_difference(ref.hidden, got.hidden), -1) << "hidden differs, q=" << q;
  }

  // (3) Two sequences sharing calls: seq 0 = tokens, seq 1 = other tokens, rows
  // interleaved in calls of mixed sizes.
  {
    auto other = random_tokens(rng, n_tokens, c.vocab);
    auto kv_o = m.make_cache(1, ctx, 16);
    RowOutputs ref_o = run_chunks(m, kv_o, 0, other, {1}, p);
    auto kv = m.make_cache(2, ctx, 16);
    std::vector<float> lg(2 * V * 8), hd(2 * d * 8);
    std::uniform_int_distribution<int> qd(1, 8);
    size_t i0 = 0, i1 = 0;
    while (i0 < tokens.size() || i1 < other.size()) {
      std::vector<model::Row> rows;
      std::vector<std::pair<int, size_t>> who;
      size_t n0 = std::min<size_t>(qd(rng), tokens.size() - i0);
      size_t n1 = std::min<size_t>(qd(rng), other.size() - i1);
      for (size_t j = 0; j < std::max(n0, n1); ++j) {  // interleave
        if (j < n1) rows.push_back({1, int32_t(i1 + j), other[i1 + j]}), who.push_back({1, i1 + j});
        if (j < n0) rows.push_back({0, int32_t(i0 + j), tokens[i0 + j]}), who.push_back({0, i0 + j});
      }
      m.forward(rows, kv, {lg.data(), nullptr, hd.data()}, p);
      for (size_t r = 0; r < rows.size(); ++r) {
        const RowOutputs& R = who[r].first == 0 ? ref : ref_o;
        size_t pos = who[r].second;
        ASSERT_EQ(first_bit_difference(rows_of(lg, V, r, r + 1), rows_of(R.logits, V, pos, pos + 1)),
                  -1) << "two-sequence call differs at seq " << who[r].first << " pos " << pos;
        ASSERT_EQ(first_bit_difference(rows_of(hd, d, r, r + 1), rows_of(R.hidden, d, pos, pos + 1)),
                  -1);
      }
      i0 += n0;
      i1 += n1;
    }
  }

  // (4) Rollback and replay: verify-style calls of K+1 draft rows where a random
  // suffix is rejected (truncate), then the true tokens continue. The final
  // outputs must equal the clean reference: a rolled-back position never
  // influences a later one.
  {
    auto kv = m.make_cache(1, ctx, 16);
    std::uniform_int_distribution<int> kd(1, 15);
    size_t n = 0;
    while (n < tokens.size()) {
      int q = std::min<int>(kd(rng) + 1, 16);
      // Rows: the true next token followed by q-1 random "drafts".
      std::vector<int32_t> rowtok = random_tokens(rng, q, c.vocab);
      std::uniform_int_distribution<size_t> ad(0, q - 1);
      size_t accept = std::min(ad(rng), tokens.size() - n - 1);  // drafts that are right
      for (size_t j = 0; j <= accept; ++j) rowtok[j] = tokens[n + j];
      std::vector<model::Row> rows;
      for (int j = 0; j < q; ++j) rows.push_back({0, int32_t(n + j), rowtok[j]});
      std::vector<float> lg(q * V), hd(q * d);
      m.forward(rows, kv, {lg.data(), nullptr, hd.data()}, p);
      for (size_t j = 0; j <= accept; ++j) {
        ASSERT_EQ(first_bit_difference(rows_of(lg, V, j, j + 1), rows_of(ref.logits, V, n + j, n + j + 1)),
                  -1) << "verify row differs after rollback at pos " << n + j;
        ASSERT_EQ(first_bit_difference(rows_of(hd, d, j, j + 1), rows_of(ref.hidden, d, n + j, n + j + 1)),
                  -1);
      }
      n += accept + 1;
      kv.truncate(0, int(n));
    }
  }
}

}  // namespace mtp::test
