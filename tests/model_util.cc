#include "model_util.h"

#include "model/fingerprint.h"

#include <cmath>
#include <cstring>
#include <fstream>

namespace mtp::test {

RowOutputs run_chunks(const model::Model& m, model::KVCache& kv, int seq,
                      const std::vector<int32_t>& tokens, const std::vector<int>& chunk_sizes,
                      ThreadPool* pool) {
  const size_t V = m.config().vocab, d = m.config().d_model;
  RowOutputs out;
  out.logits.resize(tokens.size() * V);
  out.hidden.resize(tokens.size() * d);
  size_t i = 0, c = 0;
  while (i < tokens.size()) {
    size_t q = std::min<size_t>(chunk_sizes[c++ % chunk_sizes.size()], tokens.size() - i);
    std::vector<model::Row> rows;
    for (size_t j = 0; j < q; ++j) {
      rows.push_back({seq, int32_t(kv.length(seq) + j), tokens[i + j]});
    }
    m.forward(rows, kv, {out.logits.data() + i * V, nullptr, out.hidden.data() + i * d}, pool);
    i += q;
  }
  return out;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int vocab, int lo) {
  std::uniform_int_distribution<int32_t> u(lo, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = u(rng);
  return t;
}

long first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return long(i);
  }
  return -1;
}

void write_random_llama2c(const std::string& path, int dim, int hidden, int layers, int heads,
                          int kv_heads, int vocab, int seq_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::ofstream f(path, std::ios::binary);
  int32_t h[7] = {dim, hidden, layers, heads, kv_heads, vocab, seq_len};
  f.write(reinterpret_cast<char*>(h), sizeof h);
  const int V = std::abs(vocab), hd = dim / heads, kvd = kv_heads * hd;
  auto put = [&](size_t count, float scale, float mean) {
    for (size_t i = 0; i < count; ++i) {
      float v = mean + scale * n(rng);
      f.write(reinterpret_cast<char*>(&v), 4);
    }
  };
  float ws = 1.0f / std::sqrt(float(dim));
  put(size_t(V) * dim, 1.0f, 0);                      // embedding
  put(size_t(layers) * dim, 0.1f, 1);                 // rms_att
  put(size_t(layers) * dim * dim, ws, 0);             // wq
  put(size_t(layers) * kvd * dim, ws, 0);             // wk
  put(size_t(layers) * kvd * dim, ws, 0);             // wv
  put(size_t(layers) * dim * dim, ws, 0);             // wo
  put(size_t(layers) * dim, 0.1f, 1);                 // rms_ffn
  put(size_t(layers) * hidden * dim, ws, 0);          // w1
  put(size_t(layers) * dim * hidden, 1.0f / std::sqrt(float(hidden)), 0);  // w2
  put(size_t(layers) * hidden * dim, ws, 0);          // w3
  put(dim, 0.1f, 1);                                  // final norm
  put(size_t(seq_len) * hd, 0, 0);                    // freq_cis (unused)
  if (vocab < 0) put(size_t(V) * dim, ws, 0);         // wcls
}

SmallTarget small_llama2c_target(const std::string& dir) {
  write_random_llama2c(dir + "/t.bin", 32, 64, 1, 4, 4, 50, 64, 1);
  SmallTarget t;
  t.lm = model::load_model(dir + "/t.bin", {});
  t.fingerprint = model::target_fingerprint(t.lm, /*use_cache=*/false);
  return t;
}

std::vector<float> logits_of(const model::LoadedModel& lm, const std::vector<int32_t>& tokens,
                             const std::vector<int>& chunk_sizes) {
  model::Model m(lm);
  model::KVCache kv(m.config(), 1, int(tokens.size()) + 1);
  ThreadPool pool(2);
  return run_chunks(m, kv, 0, tokens, chunk_sizes, &pool).logits;
}

double fp32_forward_tolerance(double K, int L, double row_scale) {
  return 64.0 * std::ldexp(1.0, -23) * std::sqrt(double(K) * L) * row_scale;
}

}  // namespace mtp::test
