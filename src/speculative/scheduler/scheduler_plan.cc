// The scheduler's plan for a step's decoding sequences (scheduler.h, step 2
// and "Lookups"): each one's option — the drafter's chain or its best lookup
// proposal, valued per second against the measured m(q) curve — its draft
// length from the budget (draft_budget.h), probes, and the drafter's chains
// of every sequence in one call per module.
#include <algorithm>

#include "speculative/sources/mtp_chains.h"
#include "speculative/scheduler/scheduler_seq.h"

namespace mtp::speculative {

using scheduler_detail::Clock;
using scheduler_detail::mtp_depth0;
using scheduler_detail::seconds;

namespace {
// A sequence's drafter probes (one draft) after this many steps without a
// draft (see plan_drafts).
constexpr int kProbeEvery = 8;
}  // namespace

std::vector<int> Scheduler::plan_drafts(std::span<Seq* const> dec, int rows) {
  // Each speculating sequence's option: the drafter's chain, or its best
  // lookup proposal where that is worth more (see scheduler.h).
  // Depth-0 acceptance over every sequence so far: the drafter's prior for a
  // sequence with little data of its own.
  long pool_d = pool_drafted_, pool_a = pool_accepted_;
  for (const Seq* q : dec) {
    const auto [d0, a0] = mtp_depth0(q->stats);
    pool_d += d0, pool_a += a0;
  }
  const double prior = (double(pool_a) + 2 * 0.6) / (double(pool_d) + 2);
  // The decode rows' own rate (tokens per second), against which a sequence's
  // options are valued (chain_net_value); the drafter's module calls are
  // shared by the sequences that can draft with it.
  const int n_dec = std::max<int>(1, int(dec.size()));
  const double rate = double(n_dec) / std::max(cost_(n_dec), 1e-12);
  const int n_mtp = std::max<int>(1, int(std::count_if(dec.begin(), dec.end(),
                                                       [](const Seq* q) { return q->draft_k > 0; })));
  std::vector<BudgetSeq> b(dec.size());
  for (size_t i = 0; i < dec.size(); ++i) {
    Seq& q = *dec[i];
    q.chosen = -1;
    if (q.spec_k == 0) continue;
    if (q.draft_k > 0) {
      b[i].p = q.counters.estimate(q.draft_k, prior);
      // The amortised catch-up (first_draft_seconds); the module calls
      // are shared by all sequences (allocate_drafts). Every drafter cost
      // is scaled by the live ratio of measured to modelled drafter time.
      double per_cycle = 1;
      for (double pj : b[i].p) per_cycle += pj;
      q.charged_s = first_draft_seconds(module_row_s_, q.draft_k,
                                        int(q.committed.size()) - q.drafter_at, per_cycle);
      b[i].first_s = draft_ratio_ * q.charged_s;
    }
    if (q.lookup_k == 0) continue;
    BudgetSeq lk = q.lookups->propose(q.committed, q.spec->draft_limit(q.lookup_k), arms_, q.stats);
    if (lk.p.empty()) continue;
    const double v_lk = chain_net_value(cost_, rows, rate, lk.p, 0, 0);
    const double v_mtp = b[i].p.empty() ? 0
                         : chain_net_value(cost_, rows, rate, b[i].p,
                                           b[i].first_s + draft_ratio_ * module_row_s_,
                                           draft_ratio_ * module_s_ / n_mtp);
    if (b[i].p.empty() || v_lk > v_mtp) {
      b[i] = std::move(lk);
      q.chosen = q.lookups->best();
    }
  }
  // Draft lengths: from the cost curve, or each option's longest.
  std::vector<int> k(dec.size(), 0);
  if (opt_.adaptive) {
    k = allocate_drafts(cost_, {draft_ratio_ * module_s_, draft_ratio_ * module_row_s_}, rows,
                        int(dec.size()), opt_.max_rows, b);
    // Exploration: while the pool has < 3 samples, a sequence's first decode
    // step drafts one token, so an estimate can leave the prior at all; and a
    // sequence the drafter has not drafted for kProbeEvery steps drafts one
    // (a probe). Without probes a few unlucky drafts priced the drafter out
    // for good: its counters forget toward the pooled prior, which only
    // drafts feed (measured: on the widened 1 B target at --parallel 4 the
    // drafter drafted in 2 % of the steps of whole runs, bimodally).
    for (size_t i = 0; i < dec.size(); ++i) {
      Seq& q = *dec[i];
      if (q.draft_k == 0) continue;
      const bool explore = pool_d < 3 && q.stats.cycles == 0;
      if (k[i] == 0 && q.chosen < 0 && (explore || q.mtp_idle >= kProbeEvery)) k[i] = 1;
      q.mtp_idle = k[i] > 0 && q.chosen < 0 ? 0 : q.mtp_idle + 1;
    }
  } else {
    for (size_t i = 0; i < dec.size(); ++i) {
      k[i] = dec[i]->chosen >= 0 ? int(b[i].p.size()) : dec[i]->draft_k;
    }
  }
  for (size_t i = 0; i < dec.size(); ++i) {
    if (k[i] == 0) dec[i]->chosen = -1;  // not worth its rows: judged, not verified
  }
  return k;
}

void Scheduler::draft(std::span<Seq* const> dec, std::span<const int> k) {
  // Every drafting sequence's chain in one call per module (mtp_chains.h).
  std::vector<MtpChains::Job> jobs;
  std::vector<Seq*> of;
  for (size_t i = 0; i < dec.size(); ++i) {
    Seq& s = *dec[i];
    const int limit = k[i] > 0 ? s.spec->draft_limit(k[i]) : 0;
    if (limit < 1) continue;
    if (s.chosen >= 0) {  // its lookup proposal, cut to the budget's length
      const SeqLookups::Proposal& p = s.lookups->proposals()[size_t(s.chosen)];
      const size_t n = std::min(p.tokens.size(), size_t(limit));
      const DraftSource::Kind kind = lookup_source_kind(p.source);
      s.prepared.prepared().assign_chain(std::span(p.tokens).first(n), kind);
      ++s.stats.sources[DraftSource::kind_name(kind)].chosen;
      continue;
    }
    MtpChains::Job j;
    j.slot = s.target.seq();
    j.committed = s.committed;
    j.target = &s.target;
    j.pool = pool_;
    j.modules = s.draft_k;
    j.max_k = limit;
    j.p_min = s.req.p_min;
    j.sampler = &s.draft_sampler;
    j.mode = s.req.mode;
    j.tree = &s.prepared.prepared();
    j.module_seconds = &s.module_s;
    jobs.push_back(j);
    of.push_back(&s);
  }
  if (jobs.empty()) return;
  const auto t0 = Clock::now();
  chains_->draft(jobs);
  const double wall = seconds(t0, Clock::now());
  draft_s_ += wall;
  // The budget's model of these calls (allocate_drafts: one call per depth
  // in use; per sequence its charged catch-up, its module-0 row and module
  // j's j non-final rows, row_s each) against the measured time: the live
  // ratio that scales every drafter cost of the next steps. It catches what
  // the model leaves out or times wrong at start — the catch-up of a
  // sequence that drafts intermittently (charged only one cycle's share),
  // the machine's speed now, sampling and bookkeeping.
  int depth = 0;
  double modelled = 0, calls_s = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Seq& s = *of[i];
    const int d = jobs[i].tree->max_depth();
    depth = std::max(depth, d);
    modelled += s.charged_s + (1 + double(d) * (d - 1) / 2) * module_row_s_;
    calls_s += jobs[i].seconds;
  }
  modelled += depth * module_s_;
  if (modelled > 0 && wall > 0) {
    draft_ratio_ = std::clamp((1 - kDraftRatioLive) * draft_ratio_ +
                                  kDraftRatioLive * (wall / modelled),
                              0.25, 16.0);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    Seq& s = *of[i];
    const double share = calls_s > 0 ? jobs[i].seconds / calls_s : 1.0 / double(jobs.size());
    s.stats.time_draft_s += wall * share;
    s.drafter_at = int(s.committed.size());
    if (!jobs[i].tree->empty()) {  // chosen and drafted (as SpecStats counts the union's)
      DepthCounts& c = s.stats.sources[DraftSource::kind_name(DraftSource::Kind::Mtp)];
      ++c.chosen;
      c.proposed += long(jobs[i].tree->size());
      c.time_s += wall * share;
    }
  }
}

}  // namespace mtp::speculative
