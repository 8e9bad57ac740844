#include "drafter/assistant_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace mtp::drafter {

namespace kern = mtp::kernels;

AssistantRunner::AssistantRunner(const model::Model& target, const Gemma4Assistant& a)
    : m_(target), a_(a), rope_(a.config().block) {
  MTP_CHECK(a.config().backbone == target.config().d_model,
            "assistant of backbone {} for a target of hidden size {}", a.config().backbone,
            target.config().d_model);
}

void AssistantRunner::step(std::span<const AssistantInput> rows, const model::KVCache& kv,
                           float* state_out, ThreadPool* pool) {
  const AssistantConfig& c = a_.config();
  const model::ModelConfig& b = c.block;
  const AssistantWeights& w = a_.weights();
  const size_t q = rows.size(), B = size_t(c.backbone), h = size_t(b.d_model);
  if (q == 0) return;
  // [target embedding; state] -> pre_projection.
  in_.resize(q * 2 * B);
  rows_.clear();
  for (size_t r = 0; r < q; ++r) {
    m_.embed(rows[r].token, in_.data() + r * 2 * B);
    std::memcpy(in_.data() + r * 2 * B + B, rows[r].state, B * sizeof(float));
    rows_.push_back({rows[r].seq, rows[r].pos, rows[r].token});
  }
  x_.resize(q * h);
  kern::matmul(w.pre_proj, in_.data(), q, x_.data(), pool);  // [q, hidden]
  rope_.tables(rows_, false, cs_global_);
  if (rope_.has_local()) rope_.tables(rows_, true, cs_local_);
  for (int l = 0; l < b.n_layers; ++l) {
    const model::LayerWeights& L = w.layers[size_t(l)];
    const float* cs = rope_.local_for(b.is_sliding(l)) ? cs_local_.data() : cs_global_.data();
    model::attention_in(b, l, L, rows_, nullptr, cs, x_.data(), s_, pool);
    attend(rows, l, kv, pool);
    model::attention_out(b, L, q, x_.data(), s_, pool);
    model::feed_forward(b, l, L, q, x_.data(), s_, pool);
  }
  xn_.resize(q * h);
  for (size_t r = 0; r < q; ++r) {
    kern::rmsnorm(x_.data() + r * h, w.final_norm.data(), h, b.norm_eps, xn_.data() + r * h);
  }
  kern::matmul(w.post_proj, xn_.data(), q, state_out, pool);  // [q, backbone]
  if (!c.ordered) {
    logits_.resize(q * size_t(b.vocab));
    kern::matmul(w.head, xn_.data(), q, logits_.data(), pool);  // [q, vocab]
    return;
  }
  ids_.resize(std::max(ids_.size(), q));
  sel_.resize(std::max(sel_.size(), q));
  for (size_t r = 0; r < q; ++r) centroid_head(r, xn_.data() + r * h, pool);
}

void AssistantRunner::attend(std::span<const AssistantInput> rows, int layer,
                             const model::KVCache& kv, ThreadPool* pool) {
  const model::ModelConfig& b = a_.config().block;
  const model::LayerKind k = b.layer_kind(layer);
  const int owner = k.kv_source;
  const size_t hd = size_t(k.head_dim), H = size_t(b.n_heads), KV = size_t(k.n_kv_heads);
  const size_t group = H / KV, kv_dim = size_t(kv.kv_dim(owner)), slots = size_t(kv.slots(owner));
  MTP_CHECK(kv_dim == KV * hd, "assistant layer {} reads target layer {} of width {}, not {}",
            layer, owner, kv_dim, KV * hd);
  const float scale = b.score_scale();
  const size_t q_dim = H * hd;  // s_.qkv: queries only (a layer owning no K/V)
  for (const AssistantInput& in : rows) {
    const int lo = a_.config().first_key(k.sliding, in.pos), hi = in.pos - 1;
    MTP_CHECK(in.pos >= 1 && hi < kv.length(in.seq) && kv.holds(in.seq, owner, lo) &&
                  kv.holds(in.seq, owner, hi),
              "assistant query at position {} of sequence {}: the target's layer {} does not "
              "hold its keys {}..{} (length {})", in.pos, in.seq, owner, lo, hi,
              kv.length(in.seq));
  }
  auto run = [&](size_t u0, size_t u1, size_t) {
    std::vector<float> scores;
    std::vector<kern::AttendQuery> qs;
    for (size_t u = u0; u < u1; ++u) {
      const size_t r = u / KV, kvh = u % KV;
      const AssistantInput& in = rows[r];
      const size_t lo = size_t(a_.config().first_key(k.sliding, in.pos)), hi = size_t(in.pos - 1);
      const size_t n = hi - lo + 1;
      scores.resize(group * n);
      const float* kh = kv.k(in.seq, owner) + kvh * hd;
      const float* vh = kv.v(in.seq, owner) + kvh * hd;
      for (size_t h0 = 0; h0 < group; h0 += kern::kAttendGroupMax) {
        qs.clear();
        for (size_t g = h0; g < std::min(group, h0 + kern::kAttendGroupMax); ++g) {
          const size_t head = kvh * group + g;
          qs.push_back({s_.qkv.data() + r * q_dim + head * hd, lo, hi, scores.data() + g * n,
                        s_.att.data() + (r * H + head) * hd});
        }
        kern::attend_group(qs, kh, vh, kv_dim, slots, hd, scale, b.attn_softcap);
      }
    }
  };
  const size_t units = rows.size() * KV;
  if (pool) pool->parallel_for(units, run);
  else run(0, units, 0);
}

void AssistantRunner::centroid_head(size_t r, const float* xn, ThreadPool* pool) {
  const AssistantConfig& c = a_.config();
  const AssistantWeights& w = a_.weights();
  const size_t C = size_t(c.centroids), top = size_t(c.top_k);
  const size_t n = size_t(c.tokens_per_cluster());
  cl_.resize(C);
  kern::matmul(w.centroids, xn, 1, cl_.data(), pool);  // [C]
  // The top-k clusters by score, ties to the lower index (a NaN scores -inf).
  std::vector<uint32_t> order(C);
  for (size_t i = 0; i < C; ++i) order[i] = uint32_t(i);
  auto key = [&](uint32_t i) {
    return std::isnan(cl_[i]) ? -std::numeric_limits<float>::infinity() : cl_[i];
  };
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(top), order.end(),
                    [&](uint32_t a, uint32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
  // Each selected cluster's rows of the head.
  std::vector<float> lg(top * n);
  auto run = [&](size_t b0, size_t b1, size_t) {
    for (size_t t = b0; t < b1; ++t) kern::matmul(w.clusters[order[t]], xn, 1, lg.data() + t * n, nullptr);
  };
  if (pool) pool->parallel_for(top, run);
  else run(0, top, 0);
  pairs_.clear();
  for (size_t t = 0; t < top; ++t) {
    const int32_t* ids = w.ordering.data() + size_t(order[t]) * n;
    for (size_t j = 0; j < n; ++j) pairs_.emplace_back(ids[j], lg[t * n + j]);
  }
  std::sort(pairs_.begin(), pairs_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  ids_[r].resize(pairs_.size());
  sel_[r].resize(pairs_.size());
  for (size_t i = 0; i < pairs_.size(); ++i) ids_[r][i] = pairs_[i].first, sel_[r][i] = pairs_[i].second;
}

AssistantScores AssistantRunner::scores(size_t r) const {
  if (a_.config().ordered) return {ids_[r].data(), sel_[r].data(), ids_[r].size()};
  const size_t V = size_t(a_.config().block.vocab);
  return {nullptr, logits_.data() + r * V, V};
}

std::vector<std::vector<AssistantDraft>> assistant_teacher_forced(
    const model::Model& target, const Gemma4Assistant& a, std::span<const int32_t> tokens,
    int n0, int steps, ThreadPool* pool, bool keep_scores) {
  const int T = int(tokens.size());
  if (n0 < 2 || n0 > T || steps < 1) {
    fail<InputError>("assistant replay: first committed length {} outside 2..{} or {} steps", n0,
                     T, steps);
  }
  const size_t d = size_t(target.config().d_model), B = size_t(a.config().backbone);
  // The capture of positions 0 .. T-2 in one call, in a cache that keeps
  // every position (q_max = ctx: no ring).
  model::KVCache kv = target.make_cache(1, T, T, 0);
  std::vector<model::Row> rows;
  for (int p = 0; p + 1 < T; ++p) rows.push_back({0, p, tokens[size_t(p)]});
  std::vector<float> hidden(rows.size() * d);
  target.forward(rows, kv, {nullptr, nullptr, hidden.data()}, pool);
  // Every N's chain, all N in each step's call.
  const size_t n = size_t(T - n0 + 1);
  std::vector<float> state(n * B), next(n * B), post(d);
  std::vector<AssistantInput> in(n);
  for (size_t i = 0; i < n; ++i) {
    const int N = n0 + int(i);
    target.final_norm(hidden.data() + size_t(N - 2) * d, 1, post.data());
    std::copy(post.begin(), post.end(), state.begin() + std::ptrdiff_t(i * B));
    in[i] = {0, N - 1, tokens[size_t(N - 1)], nullptr};
  }
  AssistantRunner runner(target, a);
  std::vector<std::vector<AssistantDraft>> out(n);
  for (int j = 0; j < steps; ++j) {
    for (size_t i = 0; i < n; ++i) in[i].state = state.data() + i * B;
    runner.step(in, kv, next.data(), pool);
    for (size_t i = 0; i < n; ++i) {
      const AssistantScores s = runner.scores(i);
      const size_t best = kern::argmax(s.logits, s.n);
      out[i].push_back({s.token(best), s.logits[best], {}, {}});
      if (keep_scores) {
        if (s.ids) out[i].back().ids.assign(s.ids, s.ids + s.n);
        out[i].back().logits.assign(s.logits, s.logits + s.n);
      }
      in[i].token = s.token(best);
    }
    std::swap(state, next);
  }
  return out;
}

}  // namespace mtp::drafter
