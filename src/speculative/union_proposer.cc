#include "speculative/union_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace mtp::speculative {

namespace {
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

UnionProposer::UnionProposer(std::vector<ChainSource*> lookups, MtpProposer* mtp, int mtp_k,
                             int max_k, CostModel cost, GateOptions gate, SpecStats* stats)
    : lookups_(std::move(lookups)), mtp_(mtp), mtp_k_(mtp ? mtp_k : 0),
      own_gate_(std::in_place, int(lookups_.size()) + (mtp ? 1 : 0), max_k, std::move(cost), gate),
      gate_(&*own_gate_), stats_(stats) {
  MTP_CHECK(!mtp || mtp_k >= 1, "MTP source with draft length {}", mtp_k);
  proposals_.resize(lookups_.size());
  available_.resize(lookups_.size() + (mtp ? 1 : 0));
}

UnionProposer::UnionProposer(std::vector<ChainSource*> lookups, MtpProposer* mtp, int mtp_k,
                             int max_k, SourceGate& gate, SpecStats* stats)
    : lookups_(std::move(lookups)), mtp_(mtp), mtp_k_(mtp ? mtp_k : 0), gate_(&gate),
      stats_(stats) {
  MTP_CHECK(!mtp || mtp_k >= 1, "MTP source with draft length {}", mtp_k);
  const int n = int(lookups_.size()) + (mtp ? 1 : 0);
  MTP_CHECK(gate.n_sources() == n && gate.max_k() == max_k,
            "shared gate for {} sources / max_k {} used by a union of {} / {}", gate.n_sources(),
            gate.max_k(), n, max_k);
  proposals_.resize(lookups_.size());
  available_.resize(size_t(n));
}

DepthCounts* UnionProposer::counts(DraftSource::Kind k) {
  return stats_ ? &stats_->sources[DraftSource::kind_name(k)] : nullptr;
}

void UnionProposer::propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) {
  tree.clear();
  const int N = int(committed.size());
  for (size_t i = 0; i < lookups_.size(); ++i) {
    const auto t0 = Clock::now();
    lookups_[i]->propose(committed, max_k, proposals_[i]);
    if (int(proposals_[i].size()) > max_k) proposals_[i].resize(size_t(max_k));
    const double s = since(t0);
    available_[i] = int(proposals_[i].size());
    gate_->observe_draft(int(i), std::max(1, available_[i]), s);
    if (DepthCounts* c = counts(lookups_[i]->kind())) {
      c->proposed += long(proposals_[i].size());
      c->time_s += s;
    }
  }
  const int mtp_index = int(lookups_.size());
  if (mtp_) available_[size_t(mtp_index)] = std::min(max_k, mtp_k_);
  last_ = gate_->choose(available_);
  last_n_ = N;
  if (last_.source >= 0 && last_.source < mtp_index) {
    const auto& p = proposals_[size_t(last_.source)];
    tree.assign_chain(std::span(p).first(size_t(last_.len)), lookups_[size_t(last_.source)]->kind());
  } else if (last_.source == mtp_index) {
    // Catch up on every row committed since the modules last ran (batched),
    // then draft; the catch-up is spread over the cycles it covers.
    auto t0 = Clock::now();
    mtp_->commit(committed);
    const double catch_s = since(t0);
    t0 = Clock::now();
    mtp_->propose(committed, last_.len, tree);
    const double draft_s = since(t0);
    const int len = int(tree.size());
    // Per-cycle cost when used every cycle: drafting + the catch-up of one
    // cycle's rows (the catch-up of skipped cycles is batched, cheaper per row).
    const int cycles = std::max(1, int(choices_.size()) - last_mtp_cycle_);
    gate_->observe_draft(mtp_index, std::max(1, len), draft_s + catch_s / cycles);
    last_mtp_cycle_ = int(choices_.size());
    if (DepthCounts* c = counts(DraftSource::Kind::Mtp)) {
      c->proposed += long(len);
      c->time_s += catch_s + draft_s;
    }
  }
  last_len_ = int(tree.size());
  if (last_.source >= 0) {
    DraftSource::Kind k = last_.source == mtp_index ? DraftSource::Kind::Mtp
                                                    : lookups_[size_t(last_.source)]->kind();
    if (DepthCounts* c = counts(k)) {
      ++c->chosen;
      c->probes += last_.probe;
    }
  }
  choices_.push_back(last_.source);
  pending_ = true;
  proposed_at_ = Clock::now();
}

void UnionProposer::commit(std::span<const int32_t> committed) {
  if (!pending_) return;  // no proposal this cycle (the context left no room to draft)
  pending_ = false;
  // Verify + accept took the time since propose returned: a (len + 1)-row cycle.
  gate_->observe_verify(last_len_ + 1, since(proposed_at_));
  const int accepted = std::clamp(int(committed.size()) - last_n_ - 1, 0, last_len_);
  gate_->observe(last_.source, last_len_, accepted);
  gate_->tick(last_);
  // The lookups not verified, judged against what the target emitted.
  const std::span<const int32_t> truth = committed.subspan(size_t(std::min(last_n_, int(committed.size()))));
  for (size_t i = 0; i < lookups_.size(); ++i) {
    const auto& p = proposals_[i];
    if (int(i) == last_.source || p.empty()) continue;
    const size_t n = std::min(p.size(), truth.size());
    const int matched = int(std::mismatch(p.begin(), p.begin() + long(n), truth.begin()).first - p.begin());
    gate_->observe_shadow(int(i), int(p.size()), matched, int(truth.size()));
  }
}

}  // namespace mtp::speculative
