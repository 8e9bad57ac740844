#include "spec/target_session.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/ops.h"

namespace mtp::spec {

TargetSession::TargetSession(const model::Model& m, int ctx, ThreadPool* pool)
    : m_(m), pool_(pool), kv_(m.make_cache(1, ctx)),
      hidden_(size_t(ctx) * m.config().d_model) {}

void TargetSession::prefill(std::span<const int32_t> tokens, float* last_logits) {
  const size_t V = m_.config().vocab, q_max = size_t(kv_.q_max());
  std::vector<float> lg;
  std::vector<uint8_t> mask;
  for (size_t b = 0; b < tokens.size(); b += q_max) {
    size_t e = std::min(tokens.size(), b + q_max);
    const bool last = e == tokens.size() && last_logits;
    rows_.clear();
    for (size_t i = b; i < e; ++i) rows_.push_back({0, int32_t(forwarded() + i - b), tokens[i]});
    model::ForwardOut out;
    out.hidden = hidden_.data() + size_t(forwarded()) * m_.config().d_model;
    if (last) {
      lg.resize((e - b) * V);
      mask.assign(e - b, 0);
      mask.back() = 1;
      out.logits = lg.data();
      out.logits_mask = mask.data();
    }
    m_.forward(rows_, kv_, out, pool_);
    if (last) std::copy_n(lg.data() + (e - b - 1) * V, V, last_logits);
  }
}

void TargetSession::forward(std::span<const int32_t> tokens, float* logits) {
  if (tokens.size() > size_t(kv_.q_max())) {
    fail<InputError>("one forward call takes at most {} tokens, got {}", kv_.q_max(),
                     tokens.size());
  }
  rows_.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    rows_.push_back({0, int32_t(forwarded() + i), tokens[i]});
  }
  float* h = hidden_.data() + size_t(forwarded()) * m_.config().d_model;
  m_.forward(rows_, kv_, {logits, nullptr, h}, pool_);
}

void GreedyVerifier::verify(std::span<const int32_t> committed, const DraftTree& tree,
                            std::vector<int32_t>& choices) {
  MTP_CHECK(tree.is_chain(), "GreedyVerifier verifies chains; got a tree of {} nodes", tree.size());
  const std::vector<int32_t>& drafts = tree.token;
  MTP_CHECK(stale_kv_fault_ || s_.forwarded() == int(committed.size()) - 1,
            "verify: the target has forwarded {} positions, expected {}", s_.forwarded(),
            committed.size() - 1);
  tokens_.assign(1, committed.back());
  tokens_.insert(tokens_.end(), drafts.begin(), drafts.end());
  const size_t V = s_.model().config().vocab;
  logits_.resize(tokens_.size() * V);
  s_.forward(tokens_, logits_.data());
  if (observer_) observer_(committed.size(), logits_.data(), tokens_.size());
  choices.resize(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    choices[i] = int32_t(kernels::argmax(logits_.data() + i * V, V));
  }
}

void GreedyVerifier::commit(std::span<const int32_t> committed, std::span<const int32_t>) {
  if (stale_kv_fault_) return;               // the injected protocol fault
  s_.truncate(int(committed.size()) - 1);  // drops every rejected position
}

}  // namespace mtp::spec
