// The engine's plan for a step's decoding sequences (scheduler.h, step 2):
// the free sources' proposals, each sequence's option — a free proposal or
// the priced source's chain / tree, valued per second against the measured
// m(q) curve — its draft length from the budget (policy/draft_budget.h),
// probes, and the priced source's drafts of every sequence in one call.
#include <algorithm>

#include "speculative/scheduler/scheduler_seq.h"

namespace mtp::speculative {

using scheduler_detail::Clock;
using scheduler_detail::depth0;
using scheduler_detail::seconds;

namespace {
// A sequence probes (verifies one draft) after this many steps without a
// draft: of its priced source, or of its best free proposal (see plan_drafts).
constexpr int kProbeEvery = 8;
// A free proposal is probed only when its arm expects its first draft
// accepted at least this often: a probe then costs at most about half a
// decode where verify rows are dear, and a source judged useless is never
// verified for it.
constexpr double kFreeProbeAccept = 0.5;
}  // namespace

void Scheduler::propose_free(std::span<Seq* const> dec) {
  // One call per free source for every speculating sequence (free: no forward).
  std::vector<ProposeJob> jobs;
  std::vector<Seq*> of;
  std::vector<DraftTree> out;
  for (Seq* s : dec) s->free.proposals().clear();
  for (size_t f = 0; f < free_.size(); ++f) {
    jobs.clear();
    of.clear();
    for (Seq* s : dec) {
      const int limit = s->free_k > 0 ? s->spec->draft_limit(s->free_k) : 0;
      if (limit < 1) continue;
      ProposeJob j;
      j.slot = s->target.seq();
      j.committed = s->committed;
      j.target = &s->target;
      j.max_len = limit;
      j.sampler = &s->draft_sampler;
      j.mode = s->req.mode;
      jobs.push_back(j);
      of.push_back(s);
    }
    if (jobs.empty()) continue;
    out.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) jobs[i].out = &out[i];
    free_[f]->propose(jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      Seq& s = *of[i];
      s.stats.time_draft_s += jobs[i].seconds;
      DepthCounts& st = s.stats.sources[free_[f]->name()];
      st.time_s += jobs[i].seconds;
      if (out[i].empty()) continue;
      MTP_CHECK(out[i].is_chain() && int(out[i].size()) <= jobs[i].max_len,
                "free source '{}' proposed {} nodes (a chain of at most {})", free_[f]->name(),
                out[i].size(), jobs[i].max_len);
      st.proposed += long(out[i].size());
      s.free.proposals().push_back({int(f), jobs[i].evidence, out[i].token});
    }
  }
}

std::vector<int> Scheduler::plan_drafts(std::span<Seq* const> dec, int rows) {
  // Depth-0 acceptance of the priced source over every sequence so far: its
  // prior for a sequence with little data of its own.
  long pool_d = pool_drafted_, pool_a = pool_accepted_;
  if (priced_) {
    for (const Seq* q : dec) {
      const auto [d0, a0] = depth0(q->stats, priced_->name());
      pool_d += d0, pool_a += a0;
    }
  }
  const double prior = (double(pool_a) + 2 * 0.6) / (double(pool_d) + 2);
  // The decode rows' own rate (tokens per second), against which a sequence's
  // options are valued (chain_net_value); the priced source's calls are
  // shared by the sequences that can draft with it.
  const int n_dec = std::max<int>(1, int(dec.size()));
  const double rate = double(n_dec) / std::max(cost_(n_dec), 1e-12);
  const int n_priced = std::max<int>(
      1, int(std::count_if(dec.begin(), dec.end(), [](const Seq* q) { return q->draft_k > 0; })));
  const double call_s = draft_ratio_ * priced_cost_.call_s;
  const double row_s = draft_ratio_ * priced_cost_.row_s;
  const bool trees = opt_.tree.is_tree();
  std::vector<BudgetSeq> b(dec.size());
  std::vector<int> free_best(dec.size(), -1);  // [i] its best free proposal worth a probe (-1: none)
  for (size_t i = 0; i < dec.size(); ++i) {
    Seq& q = *dec[i];
    q.chosen = -1;
    q.probe = false;
    if (q.spec_k == 0) continue;
    if (q.draft_k > 0) {
      b[i].p = q.counters.estimate(q.draft_k, prior);
      // The amortised catch-up (first_draft_seconds); the calls are shared by
      // all sequences (allocate_drafts). Every priced cost is scaled by the
      // live ratio of measured to modelled time.
      double per_cycle = 1;
      for (double pj : b[i].p) per_cycle += pj;
      q.charged_s = first_draft_seconds(priced_cost_.row_s, priced_->catch_up_rows_per_token(),
                                        int(q.committed.size()) - q.drafter_at, per_cycle);
      b[i].first_s = draft_ratio_ * q.charged_s;
    }
    if (q.free_k == 0) continue;
    BudgetSeq fr = q.free.choose(arms_, q.spec->draft_limit(q.free_k));
    if (fr.p.empty()) continue;
    if (fr.p[0] >= kFreeProbeAccept) free_best[i] = q.free.best();
    bool take;
    if (b[i].p.empty()) {
      take = true;
    } else if (trees || !opt_.adaptive) {
      // Full-length options (trees, or no budget): the more expected tokens.
      double e_free = 0, e_priced = 0;
      for (double x : fr.p) e_free += x;
      if (chooser_) {
        e_priced = chooser_->expected_tokens(chooser_->widths()) - 1;
      } else {
        for (double x : b[i].p) e_priced += x;
      }
      take = e_free > e_priced;
    } else {
      const double v_free = chain_net_value(cost_, rows, rate, fr.p, 0, 0);
      const double v_priced =
          chain_net_value(cost_, rows, rate, b[i].p, b[i].first_s + row_s, call_s / n_priced);
      take = v_free > v_priced;
    }
    if (take) {
      b[i] = std::move(fr);
      q.chosen = q.free.best();
    }
  }
  // Draft lengths: from the cost curve, or each option's longest (trees: the
  // shape's depth).
  std::vector<int> k(dec.size(), 0);
  if (opt_.adaptive && !trees) {
    k = allocate_drafts(cost_, {call_s, row_s}, rows, int(dec.size()), opt_.max_rows, b);
    // Exploration: while the pool has < 3 samples, a sequence's first decode
    // step drafts one token, so an estimate can leave the prior at all; and a
    // sequence the priced source has not drafted for kProbeEvery steps
    // drafts one (a probe). Without probes a few unlucky drafts priced the
    // drafter out for good: its counters forget toward the pooled prior,
    // which only drafts feed. A free proposal its arm expects right
    // (kFreeProbeAccept) not verified for kProbeEvery steps is probed the
    // same way: the arm is judged without verifies, but the cost curve
    // learns a verify row's price only from verifies — a curve timed high at
    // start, on a busy host, otherwise kept a good free source out for good.
    for (size_t i = 0; i < dec.size(); ++i) {
      Seq& q = *dec[i];
      if (q.draft_k > 0) {
        const bool explore = pool_d < 3 && q.stats.cycles == 0;
        if (k[i] == 0 && q.chosen < 0 && (explore || q.priced_idle >= kProbeEvery)) {
          k[i] = 1;
          q.probe = true;
        }
        q.priced_idle = k[i] > 0 && q.chosen < 0 ? 0 : q.priced_idle + 1;
      }
      if (free_best[i] < 0) continue;
      if (k[i] == 0 && q.free_idle >= kProbeEvery) {
        k[i] = 1;
        q.chosen = free_best[i];
        q.probe = true;
      }
      q.free_idle = k[i] > 0 ? 0 : q.free_idle + 1;
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
  std::vector<ProposeJob> jobs;
  std::vector<Seq*> of;
  for (size_t i = 0; i < dec.size(); ++i) {
    Seq& s = *dec[i];
    s.scores.clear();
    s.widths.clear();
    const int limit = k[i] > 0 ? s.spec->draft_limit(k[i]) : 0;
    if (limit < 1) continue;
    if (s.chosen >= 0) {  // its free proposal, cut to the budget's length
      const SeqProposals::Proposal& p = s.free.proposals()[size_t(s.chosen)];
      const size_t n = std::min(p.tokens.size(), size_t(limit));
      const char* name = free_[size_t(p.source)]->name();
      s.prepared.prepared().assign_chain(std::span(p.tokens).first(n), name);
      DepthCounts& c = s.stats.sources[name];
      ++c.chosen;
      c.probes += s.probe ? 1 : 0;
      continue;
    }
    ProposeJob j;
    j.slot = s.target.seq();
    j.committed = s.committed;
    j.target = &s.target;
    j.max_len = limit;
    j.p_min = s.req.p_min;
    j.sampler = &s.draft_sampler;
    j.mode = s.req.mode;
    j.out = &s.prepared.prepared();
    j.scores = &s.scores;
    j.depth_seconds = &s.depth_s;
    jobs.push_back(j);
    of.push_back(&s);
  }
  if (jobs.empty()) return;
  // Trees: the shape of this step (auto: the chooser's), one per job.
  std::vector<TreeOptions> shapes(jobs.size(), opt_.tree);
  if (opt_.tree.is_tree()) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (chooser_) {
        of[i]->widths = chooser_->widths();
        shapes[i].kind = TreeOptions::Kind::Static;
        shapes[i].widths = of[i]->widths;
        ++of[i]->stats.tree_shapes[widths_text(of[i]->widths)];
      }
      jobs[i].tree = &shapes[i];
    }
  }
  const auto t0 = Clock::now();
  priced_->propose(jobs);
  const double wall = seconds(t0, Clock::now());
  draft_s_ += wall;
  // The budget's model of these calls (allocate_drafts: one call per depth
  // in use; per sequence its charged catch-up, its depth-0 row and depth j's
  // j non-final rows, row_s each) against the measured time: the live ratio
  // that scales every priced cost of the next steps. It catches what the
  // model leaves out or times wrong at start — the catch-up of a sequence
  // that drafts intermittently (charged only one cycle's share), the
  // machine's speed now, sampling and bookkeeping.
  int depth = 0;
  double modelled = 0, calls_s = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Seq& s = *of[i];
    const int d = jobs[i].out->max_depth();
    depth = std::max(depth, d);
    modelled += s.charged_s + (1 + double(d) * (d - 1) / 2) * priced_cost_.row_s;
    calls_s += jobs[i].seconds;
  }
  modelled += depth * priced_cost_.call_s;
  if (modelled > 0 && wall > 0 && opt_.adaptive && !opt_.tree.is_tree()) {
    draft_ratio_ = std::clamp((1 - kDraftRatioLive) * draft_ratio_ +
                                  kDraftRatioLive * (wall / modelled),
                              0.25, 16.0);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    Seq& s = *of[i];
    const double share = calls_s > 0 ? jobs[i].seconds / calls_s : 1.0 / double(jobs.size());
    s.stats.time_draft_s += wall * share;
    s.drafter_at = int(s.committed.size());
    if (!jobs[i].out->empty()) {  // chosen and drafted
      DepthCounts& c = s.stats.sources[priced_->name()];
      ++c.chosen;
      c.probes += s.probe ? 1 : 0;
      c.proposed += long(jobs[i].out->size());
      c.time_s += wall * share;
    }
  }
}

}  // namespace mtp::speculative
