#include "spec/teacher_forced.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "drafter/mtp_runner.h"
#include "kernels/ops.h"
#include "spec/target_session.h"

namespace mtp::spec {

TeacherForced teacher_forced(const model::Model& m, const drafter::Drafter& d,
                             std::span<const int32_t> tokens, ThreadPool* pool) {
  const int N = int(tokens.size());
  const int K = d.config().K;
  TeacherForced tf;
  tf.argmax.resize(K);
  tf.max_logit.resize(K);
  tf.accuracy.assign(K, 0.0);
  tf.rows.assign(K, 0);
  if (N < 2) return tf;
  TargetSession target(m, N, pool);
  target.prefill(tokens.first(N - 1), nullptr);  // capture of positions 0..N-2
  drafter::MtpRunner runner(m, d, 1, N);
  const size_t dm = size_t(m.config().d_model), V = runner.logits_width();
  const int q_max = runner.kv(0).q_max();
  std::vector<std::vector<float>> out(K, std::vector<float>(size_t(N) * dm));
  std::vector<model::Row> rows;
  std::vector<float> h_in, logits;
  for (int k = 0; k < K; ++k) {
    const int end = N - 1 - k;  // rows [0, end)
    for (int t0 = 0; t0 < end; t0 += q_max) {
      const int t1 = std::min(end, t0 + q_max);
      rows.clear();
      h_in.resize(size_t(t1 - t0) * dm);
      for (int t = t0; t < t1; ++t) {
        rows.push_back({0, t, tokens[t + k + 1]});
        const float* h = k == 0 ? target.hidden(t) : out[k - 1].data() + size_t(t) * dm;
        std::memcpy(h_in.data() + size_t(t - t0) * dm, h, dm * sizeof(float));
      }
      logits.resize(rows.size() * V);
      runner.forward(k, rows, h_in.data(), out[k].data() + size_t(t0) * dm, logits.data(),
                     nullptr, pool);
      for (size_t r = 0; r < rows.size(); ++r) {
        const float* lg = logits.data() + r * V;
        size_t a = kernels::argmax(lg, V);
        tf.argmax[k].push_back(runner.token_of(a));
        tf.max_logit[k].push_back(lg[a]);
      }
    }
    long right = 0;
    for (int t = 0; t + k + 2 < N; ++t) {
      right += tf.argmax[k][t] == tokens[t + k + 2];
      ++tf.rows[k];
    }
    tf.accuracy[k] = tf.rows[k] ? double(right) / double(tf.rows[k]) : 0.0;
  }
  return tf;
}

}  // namespace mtp::spec
