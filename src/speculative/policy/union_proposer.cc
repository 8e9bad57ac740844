#include "speculative/policy/union_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace mtp::speculative {

namespace {
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int UnionProposer::gate_arms(std::span<ChainSource* const> lookups, bool mtp) {
  int n = mtp ? 1 : 0;
  for (const ChainSource* s : lookups) n += s->classes();
  return n;
}

void UnionProposer::init_arms() {
  MTP_CHECK(!mtp_ || mtp_k_ >= 1, "MTP source with draft length {}", mtp_k_);
  proposals_.resize(lookups_.size());
  prop_arm_.assign(lookups_.size(), -1);
  for (size_t i = 0; i < lookups_.size(); ++i) {
    MTP_CHECK(lookups_[i]->classes() >= 1, "a lookup with {} classes", lookups_[i]->classes());
    arm0_.push_back(int(arm_owner_.size()));
    arm_owner_.insert(arm_owner_.end(), size_t(lookups_[i]->classes()), int(i));
  }
  if (mtp_) {
    mtp_arm_ = int(arm_owner_.size());
    arm_owner_.push_back(int(lookups_.size()));
  }
  available_.assign(arm_owner_.size(), 0);
}

UnionProposer::UnionProposer(std::vector<ChainSource*> lookups, MtpProposer* mtp, int mtp_k,
                             int max_k, CostModel cost, GateOptions gate, SpecStats* stats)
    : lookups_(std::move(lookups)), mtp_(mtp), mtp_k_(mtp ? mtp_k : 0),
      own_gate_(std::in_place, gate_arms(lookups_, mtp != nullptr), max_k, std::move(cost), gate),
      gate_(&*own_gate_), stats_(stats) {
  init_arms();
}

UnionProposer::UnionProposer(std::vector<ChainSource*> lookups, MtpProposer* mtp, int mtp_k,
                             int max_k, SourceGate& gate, SpecStats* stats)
    : lookups_(std::move(lookups)), mtp_(mtp), mtp_k_(mtp ? mtp_k : 0), gate_(&gate),
      stats_(stats) {
  const int n = gate_arms(lookups_, mtp != nullptr);
  MTP_CHECK(gate.n_sources() == n && gate.max_k() == max_k,
            "shared gate for {} arms / max_k {} used by a union of {} / {}", gate.n_sources(),
            gate.max_k(), n, max_k);
  init_arms();
}

DepthCounts* UnionProposer::counts(DraftSource::Kind k) {
  return stats_ ? &stats_->sources[DraftSource::kind_name(k)] : nullptr;
}

void UnionProposer::propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) {
  tree.clear();
  const int N = int(committed.size());
  std::fill(available_.begin(), available_.end(), 0);
  for (size_t i = 0; i < lookups_.size(); ++i) {
    const auto t0 = Clock::now();
    lookups_[i]->propose(committed, max_k, proposals_[i]);
    if (int(proposals_[i].size()) > max_k) proposals_[i].resize(size_t(max_k));
    const double s = since(t0);
    const int c = std::clamp(lookups_[i]->last_class(), 0, lookups_[i]->classes() - 1);
    prop_arm_[i] = arm(i, c);
    available_[size_t(prop_arm_[i])] = int(proposals_[i].size());
    gate_->observe_draft(prop_arm_[i], std::max(1, int(proposals_[i].size())), s);
    if (DepthCounts* dc = counts(lookups_[i]->kind())) {
      dc->proposed += long(proposals_[i].size());
      dc->time_s += s;
    }
  }
  const int mtp_index = int(lookups_.size());  // the MTP source's index in choices()
  if (mtp_) {
    available_[size_t(mtp_arm_)] = std::min(max_k, mtp_k_);
    mtp_->draft_seconds(committed, available_[size_t(mtp_arm_)], mtp_cost_);
    gate_->set_draft_seconds(mtp_arm_, mtp_cost_);
  }
  last_ = gate_->choose(available_);
  last_n_ = N;
  const int chosen = last_.source < 0 ? -1 : arm_owner_[size_t(last_.source)];
  last_draft_s_ = 0;
  if (chosen >= 0 && chosen < mtp_index) {
    const auto& p = proposals_[size_t(chosen)];
    tree.assign_chain(std::span(p).first(size_t(last_.len)), lookups_[size_t(chosen)]->kind());
  } else if (chosen == mtp_index) {
    // Catch up on every row committed since the modules last ran (batched),
    // then draft: what the gate was told this would cost (draft_seconds).
    last_draft_s_ = mtp_->catch_up_and_propose(committed, last_.len, tree);
    const int len = int(tree.size());
    if (DepthCounts* c = counts(DraftSource::Kind::Mtp)) {
      c->proposed += long(len);
      c->time_s += last_draft_s_;
    }
  }
  last_len_ = int(tree.size());
  if (chosen >= 0) {
    DraftSource::Kind k = chosen == mtp_index ? DraftSource::Kind::Mtp
                                              : lookups_[size_t(chosen)]->kind();
    if (DepthCounts* c = counts(k)) {
      ++c->chosen;
      c->probes += last_.probe;
    }
  }
  choices_.push_back(chosen);
  pending_ = true;
  proposed_at_ = Clock::now();
}

void UnionProposer::commit(std::span<const int32_t> committed) {
  if (!pending_) return;  // no proposal this cycle (the context left no room to draft)
  pending_ = false;
  // Verify + accept took the time since propose returned: a (len + 1)-row cycle.
  const double verify_s = since(proposed_at_);
  gate_->observe_verify(last_len_ + 1, verify_s);
  const int accepted = std::clamp(int(committed.size()) - last_n_ - 1, 0, last_len_);
  gate_->observe(last_.source, last_len_, accepted, verify_s + last_draft_s_);
  gate_->tick(last_);
  // Every lookup proposal is judged against the committed text: those not
  // verified from their first draft, the verified one past the drafts it had
  // verified when they were all accepted (its tail) — as far as the text is
  // known now, the rest as later cycles commit it (lookup.h ProposalJudge).
  for (size_t i = 0; i < lookups_.size(); ++i) {
    const bool verified = prop_arm_[i] == last_.source;
    if (verified && accepted < last_len_) continue;  // its deeper drafts were never reached
    judge_.add(prop_arm_[i], size_t(last_n_), verified ? last_len_ : 0, proposals_[i]);
  }
  judge_.judge(committed, [&](const ProposalJudge::Verdict& v) {
    gate_->observe_shadow(v.arm, v.len, v.matched, v.known, v.from);
  });
}

}  // namespace mtp::speculative
