#include "speculative/cycle/target_session.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/ops.h"

namespace mtp::speculative {

TargetSession::TargetSession(const model::Model& m, int ctx, ThreadPool* pool)
    : m_(m), pool_(pool), own_kv_(m.make_cache(1, ctx)), kv_(&*own_kv_),
      hidden_(size_t(ctx) * m.config().d_model) {}

TargetSession::TargetSession(const model::Model& m, model::KVCache& shared, int seq,
                             ThreadPool* pool)
    : m_(m), pool_(pool), kv_(&shared), seq_(seq),
      hidden_(size_t(shared.ctx()) * m.config().d_model) {
  MTP_CHECK(seq >= 0 && seq < shared.n_seq(), "sequence {} of a cache of {}", seq, shared.n_seq());
}

void TargetSession::prefill(std::span<const int32_t> tokens, float* last_logits) {
  const size_t V = m_.config().vocab, q_max = size_t(kv_->q_max());
  std::vector<float> lg;
  std::vector<uint8_t> mask;
  for (size_t b = 0; b < tokens.size(); b += q_max) {
    size_t e = std::min(tokens.size(), b + q_max);
    const bool last = e == tokens.size() && last_logits;
    rows_.clear();
    for (size_t i = b; i < e; ++i) rows_.push_back({seq_, int32_t(forwarded() + i - b), tokens[i]});
    model::ForwardOut out;
    out.hidden = hidden_.data() + size_t(forwarded()) * m_.config().d_model;
    if (last) {
      lg.resize((e - b) * V);
      mask.assign(e - b, 0);
      mask.back() = 1;
      out.logits = lg.data();
      out.logits_mask = mask.data();
    }
    m_.forward(rows_, *kv_, out, pool_);
    if (last) std::copy_n(lg.data() + (e - b - 1) * V, V, last_logits);
  }
}

void TargetSession::forward(std::span<const int32_t> tokens, float* logits) {
  if (tokens.size() > size_t(kv_->q_max())) {
    fail<InputError>("one forward call takes at most {} tokens, got {}", kv_->q_max(),
                     tokens.size());
  }
  rows_.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    rows_.push_back({seq_, int32_t(forwarded() + i), tokens[i]});
  }
  float* h = hidden_.data() + size_t(forwarded()) * m_.config().d_model;
  m_.forward(rows_, *kv_, {logits, nullptr, h}, pool_);
}

void TargetSession::forward_tree(int32_t root, std::span<const int32_t> tree_tokens,
                                 std::span<const int32_t> tree_parents, float* logits) {
  MTP_CHECK(tree_tokens.size() == tree_parents.size(), "tree of {} tokens and {} parents",
            tree_tokens.size(), tree_parents.size());
  if (tree_tokens.size() + 1 > size_t(kv_->q_max())) {
    fail<InputError>("one forward call takes at most {} rows; a tree of {} nodes and its root "
                     "need {}", kv_->q_max(), tree_tokens.size(), tree_tokens.size() + 1);
  }
  const int base = forwarded();
  rows_.clear();
  rows_.push_back({seq_, base, root});
  for (size_t i = 0; i < tree_tokens.size(); ++i) {
    const int32_t p = tree_parents[i];
    const int32_t pos = p < 0 ? base + 1 : rows_[size_t(p) + 1].pos + 1;
    rows_.push_back({seq_, pos, tree_tokens[i], int32_t(i), p});
  }
  const size_t d = size_t(m_.config().d_model);
  tree_hidden_.resize(rows_.size() * d);
  m_.forward(rows_, *kv_, {logits, nullptr, tree_hidden_.data()}, pool_);
  std::copy_n(tree_hidden_.data(), d, hidden_row(base));
}

void TargetSession::hold_tree(const float* hidden_rows, size_t rows) {
  const size_t d = size_t(m_.config().d_model);
  tree_hidden_.assign(hidden_rows, hidden_rows + rows * d);
  std::copy_n(tree_hidden_.data(), d, hidden_row(forwarded() - 1));
}

void TargetSession::commit_tree(std::span<const int32_t> path) {
  const int base = forwarded();
  kv_->commit_tree(seq_, path);
  const size_t d = size_t(m_.config().d_model);
  for (size_t i = 0; i < path.size(); ++i) {
    std::copy_n(tree_hidden_.data() + (size_t(path[i]) + 1) * d, d, hidden_row(base + int(i)));
  }
}

void TargetVerifier::verify(std::span<const int32_t> committed, const DraftTree& tree,
                            std::vector<int32_t>& choices) {
  MTP_CHECK(tree.dist.empty() || tree.dist.size() == tree.size(),
            "a draft tree carries {} distributions for {} nodes", tree.dist.size(), tree.size());
  MTP_CHECK(stale_kv_fault_ || s_.forwarded() == int(committed.size()) - 1,
            "verify: the target has forwarded {} positions, expected {}", s_.forwarded(),
            committed.size() - 1);
  const size_t V = s_.model().config().vocab;
  logits_.resize((tree.size() + 1) * V);
  if (!tree.is_chain()) {
    s_.forward_tree(committed.back(), tree.token, tree.parent, logits_.data());
  } else {
    tokens_.assign(1, committed.back());
    tokens_.insert(tokens_.end(), tree.token.begin(), tree.token.end());
    s_.forward(tokens_, logits_.data());
    if (observer_) observer_(committed.size(), logits_.data(), tokens_.size());
  }
  choose_all(committed, tree, logits_.data(), choices);
}

void TargetVerifier::choose_all(std::span<const int32_t> committed, const DraftTree& tree,
                                const float* logits, std::vector<int32_t>& choices) {
  const size_t V = s_.model().config().vocab;
  const int64_t n = int64_t(committed.size());
  choices.resize(tree.size() + 1);
  tree_held_ = !tree.is_chain();  // commit() keeps the accepted path
  tree_base_ = int(committed.size());
  if (tree_held_) {
    if (mode_ == SpecSampling::Rejection && !sampler_.greedy()) {
      fail<InputError>("draft trees are verified at temperature 0 or with coupled sampling; "
                       "rejection sampling verifies chains only");
    }
    // Row 0: after the committed sequence; row i + 1: after node i's path,
    // the token at position N + depth(i).
    choices[0] = choose(logits, n, -1, nullptr);
    for (size_t i = 0; i < tree.size(); ++i) {
      choices[i + 1] = choose(logits + (i + 1) * V, n + tree.depth(i), -1, nullptr);
    }
    return;
  }
  const std::vector<int32_t>& drafts = tree.token;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const bool bonus = j == drafts.size();
    const TokenDist* q = !bonus && j < tree.dist.size() ? &tree.dist[j] : nullptr;
    choices[j] = choose(logits + j * V, n + int64_t(j), bonus ? -1 : drafts[j], q);
  }
}

int32_t TargetVerifier::choose(const float* row, int64_t pos, int32_t draft, const TokenDist* q) {
  const size_t V = s_.model().config().vocab;
  const uint64_t seed = sampler_.options().seed;
  if (fault_ == Fault::AcceptSecondChoice && draft >= 0) {
    // Broken on purpose: the draft passes when it is the target's best or
    // second-best candidate by the same (noisy) score.
    int32_t best = -1, second = -1;
    double b1 = -INFINITY, b2 = -INFINITY;
    if (sampler_.greedy()) {
      for (size_t i = 0; i < V; ++i) {
        const double sc = row[i];
        if (sc > b1) b2 = b1, second = best, b1 = sc, best = int32_t(i);
        else if (sc > b2) b2 = sc, second = int32_t(i);
      }
    } else {
      sampler_.distribution(row, V, nullptr, p_);
      for (size_t i = 0; i < p_.ids.size(); ++i) {
        const double sc = std::log(p_.p[i]) + keyed_gumbel(seed, pos, p_.ids[i], NoiseStream::Choice);
        if (sc > b1) b2 = b1, second = best, b1 = sc, best = p_.ids[i];
        else if (sc > b2) b2 = sc, second = p_.ids[i];
      }
    }
    if (draft == best || draft == second) return draft;
    return best;
  }
  if (mode_ != SpecSampling::Rejection || sampler_.greedy() || draft < 0) {
    return sampler_.sample(row, V, pos);  // argmax, or the coupled keyed draw
  }
  // A proposer that drafts deterministically (the drift oracle, a lookup)
  // gives no distribution: q is the point mass at its draft.
  TokenDist point;
  if (!q) {
    point.ids = {draft};
    point.p = {1.0};
    q = &point;
  }
  // Rejection sampling: accept d with probability min(1, p(d) / q(d)).
  sampler_.distribution(row, V, nullptr, p_);
  const double pd = p_.prob(draft), qd = q->prob(draft);
  const double u = keyed_uniform(seed, pos, draft, NoiseStream::Accept);
  if (fault_ == Fault::AcceptWithoutTest || (qd > 0 && u < std::min(1.0, pd / qd))) return draft;
  if (fault_ == Fault::ResampleFromP) return sample_dist(p_, seed, pos, NoiseStream::Residual);
  residual_.ids.clear();
  residual_.p.clear();
  double sum = 0;
  for (size_t i = 0; i < p_.ids.size(); ++i) {
    const double r = p_.p[i] - q->prob(p_.ids[i]);
    if (r > 0) residual_.ids.push_back(p_.ids[i]), residual_.p.push_back(r), sum += r;
  }
  if (!(sum > 0)) return sample_dist(p_, seed, pos, NoiseStream::Residual);  // p == q: unreachable
  return sample_dist(residual_, seed, pos, NoiseStream::Residual);
}

void TargetVerifier::commit(std::span<const int32_t> committed, std::span<const int32_t> accepted) {
  if (tree_held_) {
    // The root is forwarded; keep the accepted nodes the committed sequence
    // holds (all of them unless generation ended inside the path).
    tree_held_ = false;
    const int keep = std::min(int(accepted.size()), int(committed.size()) - 1 - tree_base_);
    s_.commit_tree(accepted.first(size_t(std::max(0, keep))));
    if (s_.forwarded() > int(committed.size()) - 1) s_.truncate(int(committed.size()) - 1);
    return;
  }
  if (stale_kv_fault_) return;               // the injected protocol fault
  s_.truncate(int(committed.size()) - 1);  // drops every rejected position
}

}  // namespace mtp::speculative
