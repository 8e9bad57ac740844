#include "speculative/sources/mtp_chains.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "drafter/module_rows.h"
#include "kernels/ops.h"

namespace mtp::speculative {

namespace {
using Clock = std::chrono::steady_clock;

int modules_of(const MtpChains::Job& j, int K) { return j.modules > 0 ? std::min(j.modules, K) : K; }
}  // namespace

float top_probability(const float* logits, size_t vocab) {
  float mx = logits[kernels::argmax(logits, vocab)];
  double sum = 0;
  for (size_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return float(1.0 / sum);
}

int budget_beam(int budget) {
  return std::clamp(int(std::ceil(std::sqrt(double(budget)))), 1, 8);
}

void level_to_expand(std::vector<int>& expand, size_t begin, size_t end, int beam,
                     const std::vector<double>& cum) {
  expand.resize(end - begin);
  std::iota(expand.begin(), expand.end(), int(begin));
  if (beam > 0 && int(expand.size()) > beam) {
    std::stable_sort(expand.begin(), expand.end(),
                     [&](int a, int b) { return cum[size_t(a)] > cum[size_t(b)]; });
    expand.resize(size_t(beam));
    std::sort(expand.begin(), expand.end());
  }
}

void keep_most_probable(DraftTree& tree, std::vector<float>* scores,
                        const std::vector<double>& cum, const std::vector<int>& depth,
                        int budget) {
  if (int(tree.size()) <= budget) return;
  std::vector<int> order(tree.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (cum[size_t(a)] != cum[size_t(b)]) return cum[size_t(a)] > cum[size_t(b)];
    return depth[size_t(a)] < depth[size_t(b)];
  });
  std::vector<uint8_t> keep(tree.size(), 0);
  for (int i = 0; i < budget; ++i) keep[size_t(order[size_t(i)])] = 1;
  DraftTree kept;
  std::vector<float> kept_scores;
  std::vector<int> index(tree.size(), -1);
  for (size_t i = 0; i < tree.size(); ++i) {
    if (!keep[i]) continue;
    const int p = tree.parent[i];
    MTP_CHECK(p < 0 || index[size_t(p)] >= 0, "budget pruning kept node {} without its parent", i);
    index[i] = kept.push(tree.token[i], p < 0 ? -1 : index[size_t(p)], tree.source[i]);
    if (scores) kept_scores.push_back((*scores)[i]);
  }
  tree = std::move(kept);
  if (scores) *scores = std::move(kept_scores);
}

int32_t choose_draft(Sampler& sampler, SpecSampling mode, const float* lg, size_t n,
                     const int32_t* ids, int64_t pos, DraftTree& tree, float& max_logit) {
  const size_t a = kernels::argmax(lg, n);
  max_logit = lg[a];
  if (sampler.greedy()) return ids ? ids[a] : int32_t(a);
  if (mode == SpecSampling::Coupled) return sampler.sample(lg, n, pos, ids, NoiseStream::Choice);
  TokenDist q;
  sampler.distribution(lg, n, ids, q);
  const int32_t t = sample_dist(q, sampler.options().seed, pos, NoiseStream::Draft);
  tree.dist.push_back(std::move(q));  // node tree.size() is pushed next
  return t;
}

MtpChains::MtpChains(const model::Model& m, const drafter::Drafter& d, int n_slots, int ctx)
    : runner_(m, d, n_slots, ctx), d_(size_t(m.config().d_model)) {
  const int K = d.config().K;
  out_.assign(size_t(n_slots), std::vector<std::vector<float>>(
                                   size_t(K), std::vector<float>(size_t(ctx) * d_)));
  d0_logits_.assign(size_t(n_slots), std::vector<float>(runner_.logits_width()));
  d0_row_.assign(size_t(n_slots), -1);
}

void MtpChains::release(int slot) {
  for (int k = 0; k < K(); ++k) runner_.kv(k).truncate(slot, 0);
  d0_row_.at(size_t(slot)) = -1;
}

template <class TokAt>
void MtpChains::run(int k, std::span<Job> jobs, std::vector<Piece>& pieces, TokAt&& token_at) {
  const int q_max = runner_.kv(k).q_max();
  const size_t V = runner_.logits_width();
  ThreadPool* pool = jobs.empty() ? nullptr : jobs[0].pool;
  piece_logits_.resize(std::max(piece_logits_.size(), pieces.size()));
  // Call c holds rows [t0 + c·q_max, t0 + (c+1)·q_max) of every piece: one
  // call in the usual case, more only for a catch-up longer than q_max.
  int calls = 0;
  for (const Piece& p : pieces) calls = std::max(calls, (p.t1 - p.t0 + q_max - 1) / q_max);
  struct Span {
    size_t piece;
    int t0, t1;
    size_t row0;
  };
  std::vector<Span> spans;
  for (int c = 0; c < calls; ++c) {
    rows_.clear();
    h_in_.clear();
    mask_.clear();
    spans.clear();
    bool any_logits = false;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& p = pieces[i];
      const int a = p.t0 + c * q_max, b = std::min(p.t1, a + q_max);
      if (a >= b) continue;
      const Job& j = jobs[p.job];
      spans.push_back({i, a, b, rows_.size()});
      auto h_prev = [&](int t) {
        return k == 0 ? j.target->hidden(t) : out(j.slot, k - 1) + size_t(t) * d_;
      };
      drafter::append_module_rows(j.slot, k, a, b, [&](int x) { return token_at(p.job, x); },
                                  h_prev, d_, rows_, h_in_);
      mask_.resize(rows_.size(), 0);
      if (p.logits && b == p.t1) mask_.back() = 1, any_logits = true;
    }
    h_out_.resize(rows_.size() * d_);
    if (any_logits) logits_.resize(rows_.size() * V);
    const auto t0 = Clock::now();
    runner_.forward(k, rows_, h_in_.data(), h_out_.data(), any_logits ? logits_.data() : nullptr,
                    any_logits ? mask_.data() : nullptr, pool);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (on_call) on_call(k, int(rows_.size()), s);
    for (const Span& sp : spans) {
      const Piece& p = pieces[sp.piece];
      Job& j = jobs[p.job];
      const size_t n = size_t(sp.t1 - sp.t0);
      std::memcpy(out(j.slot, k) + size_t(sp.t0) * d_, h_out_.data() + sp.row0 * d_,
                  n * d_ * sizeof(float));
      const double share = s * double(n) / double(rows_.size());
      j.seconds += share;
      if (j.module_seconds) (*j.module_seconds)[size_t(k)] += share;
      if (p.logits && sp.t1 == p.t1) {
        const float* lg = logits_.data() + (sp.row0 + n - 1) * V;
        piece_logits_[sp.piece].assign(lg, lg + V);
      }
    }
  }
}

void MtpChains::catch_up(std::span<Job> jobs, int modules) {
  std::vector<uint8_t> seen(d0_row_.size(), 0);
  for (const Job& j : jobs) {
    const int N = int(j.committed.size());
    MTP_CHECK(j.slot >= 0 && size_t(j.slot) < seen.size() && !seen[size_t(j.slot)],
              "drafter call: slot {} missing or named twice", j.slot);
    seen[size_t(j.slot)] = 1;
    MTP_CHECK(j.target && j.target->forwarded() >= N - 1,
              "drafter catch-up: the target has forwarded {} positions, need {}",
              j.target ? j.target->forwarded() : -1, N - 1);
    // Module 0's logits must be those of row N-2; if that row is already
    // final but its logits were not kept, recompute it.
    if (d0_row_[size_t(j.slot)] != N - 2 && runner_.kv(0).length(j.slot) > N - 2 && N >= 2) {
      runner_.kv(0).truncate(j.slot, N - 2);
    }
  }
  std::vector<Piece> pieces;
  for (int k = 0; k < K(); ++k) {
    pieces.clear();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& j = jobs[i];
      if (k >= std::min(modules, modules_of(j, K()))) continue;
      const int end = drafter::module_row_count(int(j.committed.size()), k);  // final: [0, end)
      const int begin = runner_.kv(k).length(j.slot);
      if (begin < end) pieces.push_back({i, begin, end, k == 0});
    }
    if (pieces.empty()) continue;
    run(k, jobs, pieces, [&](size_t i, int x) { return jobs[i].committed[size_t(x)]; });
    if (k != 0) continue;
    for (size_t p = 0; p < pieces.size(); ++p) {  // logits of row N-2
      const Job& j = jobs[pieces[p].job];
      d0_logits_[size_t(j.slot)] = piece_logits_[p];
      d0_row_[size_t(j.slot)] = int(j.committed.size()) - 2;
    }
  }
}

void MtpChains::draft(std::span<Job> jobs) {
  catch_up(jobs, 1);
  const size_t V = runner_.logits_width();
  drafts_.resize(std::max(drafts_.size(), jobs.size()));
  std::vector<uint8_t> live(jobs.size(), 0);
  auto push = [&](size_t i, const float* lg, int k) {
    Job& j = jobs[i];
    const int N = int(j.committed.size());
    float max_logit = 0;
    // Module k drafts the token at sequence position N + k.
    const std::vector<int32_t>& vocab = runner_.drafter().config().draft_vocab;
    const int32_t t = choose_draft(*j.sampler, j.mode, lg, runner_.logits_width(),
                                   vocab.empty() ? nullptr : vocab.data(), N + k, *j.tree,
                                   max_logit);
    drafts_[i].push_back(t);
    j.tree->push(t, k - 1, {kMtpSource, k});
    if (j.history) j.history->push_back({N, k, t, max_logit});
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = jobs[i];
    MTP_CHECK(j.tree && j.sampler, "drafter job {} has no tree or sampler", i);
    j.tree->clear();
    drafts_[i].clear();
    const int N = int(j.committed.size());
    if (j.max_k < 1 || modules_of(j, K()) < 1 || d0_row_[size_t(j.slot)] != N - 2) continue;
    const float* lg = d0_logits(j.slot);
    if (j.p_min > 0 && top_probability(lg, V) < j.p_min) continue;
    push(i, lg, 0);
    live[i] = 1;
  }
  std::vector<Piece> pieces;
  for (int k = 1; k < K(); ++k) {
    // Module k's rows per job: final [0, final_len), of which [c0, final_len)
    // are not in its cache yet (the catch-up), and non-final
    // [final_len, N - 1), from the drafts, all in the same call (a row's
    // result does not depend on which rows share its call). Outputs land in
    // out(slot, k) at their row index; rows past final_len are scratch there,
    // read by module k + 1 below and overwritten once they become final.
    pieces.clear();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& j = jobs[i];
      if (!live[i]) continue;
      if (k >= std::min(j.max_k, modules_of(j, K()))) {
        live[i] = 0;
        continue;
      }
      const int N = int(j.committed.size());
      const int final_len = drafter::module_row_count(N, k), end = N - 1;
      const int c0 = runner_.kv(k).length(j.slot);
      MTP_CHECK(c0 <= final_len && end - final_len <= runner_.kv(k).q_max(),
                "module {}: cache length {}, final rows {}, rows {}, q_max {}", k, c0, final_len,
                end, runner_.kv(k).q_max());
      pieces.push_back({i, c0, end, true});
    }
    if (pieces.empty()) break;
    run(k, jobs, pieces, [&](size_t i, int x) {
      const int N = int(jobs[i].committed.size());
      return x < N ? jobs[i].committed[size_t(x)] : drafts_[i][size_t(x - N)];
    });
    for (size_t p = 0; p < pieces.size(); ++p) {
      const size_t i = pieces[p].job;
      const Job& j = jobs[i];
      // Non-final rows never stay in the cache.
      runner_.kv(k).truncate(j.slot, drafter::module_row_count(int(j.committed.size()), k));
      const float* lg = piece_logits_[p].data();
      if (j.p_min > 0 && top_probability(lg, V) < j.p_min) {
        live[i] = 0;
        continue;
      }
      push(i, lg, k);
    }
  }
}

}  // namespace mtp::speculative
