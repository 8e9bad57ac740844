#include "drafter/teacher_forced.h"

#include <algorithm>

#include "drafter/module_rows.h"
#include "drafter/mtp_runner.h"
#include "kernels/ops.h"

namespace mtp::drafter {

namespace {
// The target's capture hidden of positions 0..n-1 ([n, d]), forwarded in calls
// of at most q_max rows (the same rows every forward path produces: invariant 1).
std::vector<float> capture(const model::Model& m, std::span<const int32_t> tokens,
                           ThreadPool* pool) {
  const int n = int(tokens.size());
  model::KVCache kv = m.make_cache(1, std::max(1, n));
  std::vector<float> hidden(size_t(n) * m.config().d_model);
  std::vector<model::Row> rows;
  for_each_row_chunk(0, n, kv.q_max(), [&](int t0, int t1) {
    rows.clear();
    for (int t = t0; t < t1; ++t) rows.push_back({0, t, tokens[size_t(t)]});
    model::ForwardOut out;
    out.hidden = hidden.data() + size_t(t0) * m.config().d_model;
    m.forward(rows, kv, out, pool);
  });
  return hidden;
}
}  // namespace

TeacherForced teacher_forced(const model::Model& m, const Drafter& d,
                             std::span<const int32_t> tokens, ThreadPool* pool) {
  const int N = int(tokens.size());
  const int K = d.config().K;
  TeacherForced tf;
  tf.argmax.resize(K);
  tf.max_logit.resize(K);
  tf.accuracy.assign(K, 0.0);
  tf.rows.assign(K, 0);
  if (N < 2) return tf;
  const std::vector<float> cap = capture(m, tokens.first(N - 1), pool);  // positions 0..N-2
  MtpRunner runner(m, d, 1, N);
  const size_t dm = size_t(m.config().d_model), V = runner.logits_width();
  std::vector<std::vector<float>> out(K, std::vector<float>(size_t(N) * dm));
  std::vector<model::Row> rows;
  std::vector<float> h_in, logits;
  for (int k = 0; k < K; ++k) {
    auto h_prev = [&](int t) {
      return k == 0 ? cap.data() + size_t(t) * dm : out[k - 1].data() + size_t(t) * dm;
    };
    for_each_row_chunk(0, module_row_count(N, k), runner.kv(k).q_max(), [&](int t0, int t1) {
      gather_module_rows(0, k, t0, t1, tokens, h_prev, dm, rows, h_in);
      logits.resize(rows.size() * V);
      runner.forward(k, rows, h_in.data(), out[k].data() + size_t(t0) * dm, logits.data(),
                     nullptr, pool);
      for (size_t r = 0; r < rows.size(); ++r) {
        const float* lg = logits.data() + r * V;
        size_t a = kernels::argmax(lg, V);
        tf.argmax[k].push_back(runner.token_of(a));
        tf.max_logit[k].push_back(lg[a]);
      }
    });
    long right = 0;
    for (int t = 0; module_target_index(k, t) < N; ++t) {
      right += tf.argmax[k][size_t(t)] == tokens[size_t(module_target_index(k, t))];
      ++tf.rows[k];
    }
    tf.accuracy[k] = tf.rows[k] ? double(right) / double(tf.rows[k]) : 0.0;
  }
  return tf;
}

}  // namespace mtp::drafter
