// One step of the engine (scheduler.h, steps 2-4): the plan, ONE target
// forward over every sequence's rows, then each sequence's first token
// (prefill done) or its verify's accept, commit, trace and finish.
#include <algorithm>
#include <cstring>

#include "speculative/scheduler/scheduler_seq.h"

namespace mtp::speculative {

using scheduler_detail::Clock;
using scheduler_detail::seconds;

void Scheduler::plan_and_forward() {
  const auto step0 = Clock::now();
  // Decoding sequences (one root row each) and prefilling ones.
  std::vector<Seq*> dec, pre;
  for (auto& p : slots_) {
    if (!p) continue;
    (p->prefilling() ? pre : dec).push_back(p.get());
  }
  int rows = int(dec.size());
  // Prefill chunks take what the decode roots leave of the row budget (at
  // least one row in all, so a step always makes progress).
  std::vector<int> chunk(pre.size(), 0);
  for (size_t i = 0; i < pre.size(); ++i) {
    const int left = int(pre[i]->req.prompt.size()) - pre[i]->prefilled;
    const int room = std::max(opt_.max_rows - rows, rows == 0 ? 1 : 0);
    chunk[i] = std::min({left, opt_.prefill_chunk, room});
    rows += chunk[i];
  }
  if (!free_.empty()) propose_free(dec);
  std::vector<int> k = plan_drafts(dec, rows);
  draft(dec, k);
  for (size_t i = 0; i < dec.size(); ++i) dec[i]->tree = &dec[i]->spec->draft(k[i]);
  const double fwd_s = [&] {
    const auto t0 = Clock::now();
    forward_rows(dec, pre, chunk);
    return seconds(t0, Clock::now());
  }();
  after_prefill(pre);
  // The tree chooser learns a cycle's costs from steps with one sequence and
  // nothing else (its cycle is then the step).
  after_verify(dec, fwd_s, chooser_ && dec.size() == 1 && pre.empty() ? &step0 : nullptr);
}

void Scheduler::forward_rows(std::span<Seq* const> dec, std::span<Seq* const> pre,
                             std::span<const int> chunk) {
  const size_t V = size_t(m_.config().vocab), D = size_t(m_.config().d_model);
  rows_.clear();
  mask_.clear();
  for (Seq* sp : dec) {
    Seq& s = *sp;
    const DraftTree& tree = *s.tree;
    MTP_CHECK(s.target.forwarded() == int(s.committed.size()) - 1,
              "sequence {}: the target has forwarded {} positions, expected {}", s.id,
              s.target.forwarded(), s.committed.size() - 1);
    s.row0 = rows_.size();
    s.nrows = int(tree.size()) + 1;
    const int32_t pos = s.target.forwarded();
    rows_.push_back({s.target.seq(), pos, s.committed.back()});
    const bool chain = tree.is_chain();
    for (size_t j = 0; j < tree.size(); ++j) {
      // A chain's drafts at the next positions; a tree's nodes as tree rows
      // (model/kv_cache.h): position pos + depth, K/V in tree slots.
      if (chain) {
        rows_.push_back({s.target.seq(), pos + int32_t(j) + 1, tree.token[j]});
      } else {
        rows_.push_back({s.target.seq(), pos + tree.depth(j), tree.token[j], int32_t(j),
                         tree.parent[j]});
      }
    }
    mask_.resize(rows_.size(), 1);
  }
  for (size_t i = 0; i < pre.size(); ++i) {
    Seq& s = *pre[i];
    s.row0 = rows_.size();
    s.nrows = chunk[i];
    for (int j = 0; j < chunk[i]; ++j) {
      rows_.push_back({s.target.seq(), s.prefilled + j, s.req.prompt[size_t(s.prefilled + j)]});
    }
    mask_.resize(rows_.size(), 0);
    if (chunk[i] > 0 && s.prefilled + chunk[i] == int(s.req.prompt.size())) mask_.back() = 1;
  }
  // ONE forward for every sequence's rows.
  logits_.resize(rows_.size() * V);
  hidden_.resize(rows_.size() * D);
  const auto t0 = Clock::now();
  m_.forward(rows_, kv_, {logits_.data(), mask_.data(), hidden_.data()}, pool_);
  const double fwd_s = seconds(t0, Clock::now());
  ++forwards_;
  forward_rows_ += long(rows_.size());
  forward_s_ += fwd_s;
  if (speculates() && opt_.adaptive && opt_.learn_costs) cost_.observe(int(rows_.size()), fwd_s);
  // Capture hidden: by position; a tree's rows held until its commit.
  for (auto& p : slots_) {
    if (!p || p->nrows == 0) continue;
    if (p->tree && !p->tree->is_chain() && !p->prefilling()) {
      p->target.hold_tree(hidden_.data() + p->row0 * D, size_t(p->nrows));
      continue;
    }
    for (int j = 0; j < p->nrows; ++j) {
      const size_t r = p->row0 + size_t(j);
      std::memcpy(p->target.hidden_row(rows_[r].pos), hidden_.data() + r * D, D * sizeof(float));
    }
  }
}

void Scheduler::after_prefill(std::span<Seq* const> pre) {
  const size_t V = size_t(m_.config().vocab);
  std::vector<Seq*> done;
  for (Seq* sp : pre) {
    Seq& s = *sp;
    s.prefilled += s.nrows;
    if (!s.prefilling()) done.push_back(&s);
  }
  // The priced source's pass over the prompts just forwarded (all but their
  // last token), batched: prompt processing, as the target's prefill.
  std::vector<ProposeJob> jobs;
  for (Seq* s : done) {
    if (!priced_ || s->draft_k == 0) continue;
    ProposeJob j;
    j.slot = s->target.seq();
    j.committed = s->committed;
    j.target = &s->target;
    j.depth_seconds = &s->depth_s;
    jobs.push_back(j);
  }
  if (!jobs.empty()) {
    priced_->prefill(jobs);
    for (Seq* s : done) {
      if (s->draft_k > 0) std::fill(s->depth_s.begin(), s->depth_s.end(), 0.0);
    }
  }
  for (Seq* sp : done) {
    Seq& s = *sp;
    const size_t last = s.row0 + size_t(s.nrows) - 1;
    s.nrows = 0;
    s.drafter_at = int(s.committed.size());
    s.prompt_s = seconds(s.admitted, Clock::now());
    const size_t before = s.sink.tokens().size();
    const int32_t t = s.sampler.sample(logits_.data() + last * V, V, int64_t(s.committed.size()));
    if (s.sink.push(t)) {
      s.committed.push_back(t);
      const bool tracing = s.req.record_trace || opt_.trace;
      s.spec.emplace(s.req.speculate ? static_cast<Proposer&>(s.prepared) : s.none, s.committed,
                     s.sink, std::max(1, s.spec_k), ctx_, s.stats, tracing ? &s.trace : nullptr);
    }
    emit_new_tokens(s, before, nullptr, nullptr);
    if (s.sink.done() || s.spec->done()) finish(s.target.seq());
  }
}

void Scheduler::after_verify(std::span<Seq* const> dec, double fwd_s,
                             const Clock::time_point* alone_since) {
  const size_t V = size_t(m_.config().vocab);
  for (Seq* sp : dec) {
    Seq& s = *sp;
    s.verifier.choose_all(s.committed, *s.tree, logits_.data() + s.row0 * V, s.choices);
    if (s.spec_k > 0) s.stats.time_verify_s += fwd_s;
    const size_t before = s.sink.tokens().size(), n_before = s.committed.size();
    const size_t traced = s.trace.size();
    s.spec->accept(s.choices);
    const int accepted = int(s.spec->accepted_nodes().size());
    s.counters.step();  // the priced source's counters learn from its own drafts only
    if (!s.tree->empty() && priced_ && s.tree->source[0].is(priced_->name())) {
      s.counters.add(s.tree->max_depth(), accepted);
      if (chooser_ && !s.widths.empty()) {
        // The rank of the accepted child at each depth: its earlier siblings.
        std::vector<int> ranks;
        for (const int32_t node : s.spec->accepted_nodes()) {
          int rank = 0;
          for (int32_t i = 0; i < node; ++i) rank += s.tree->parent[size_t(i)] == s.tree->parent[size_t(node)];
          ranks.push_back(rank);
        }
        chooser_->observe(s.widths, ranks);
      }
    }
    if (!free_.empty() && s.free_k > 0) {
      s.free.judge(arms_, s.chosen, int(s.tree->size()), accepted, s.committed, n_before);
    }
    if (s.trace.size() > traced) record_cycle(s);
    emit_new_tokens(s, before, s.tree, &s.spec->accepted_nodes());
    // The target keeps the accepted drafts' K/V (a tree: its accepted path)
    // and drops the rest; the sources catch up lazily, in their next propose.
    if (!s.sink.done()) s.verifier.commit(s.committed, s.spec->accepted_nodes());
    if (alone_since && !s.widths.empty()) {
      chooser_->observe_verify(s.nrows, fwd_s);
      chooser_->observe_cycle(s.widths, seconds(*alone_since, Clock::now()));
    }
    s.nrows = 0;
    if (s.spec->done()) finish(s.target.seq());
  }
}

void Scheduler::record_cycle(Seq& s) {
  CycleTrace& t = s.trace.back();
  t.id = s.id;
  t.scores = s.scores;
  for (const SeqProposals::Proposal& p : s.free.proposals()) {
    t.proposals.push_back({free_[size_t(p.source)]->name(), p.cls, p.tokens});
  }
  if (s.chosen < 0 && !t.drafts.empty() && priced_) {
    t.proposals.push_back({priced_->name(), 0, t.drafts});
  }
  if (opt_.trace) opt_.trace(t);
  if (!s.req.record_trace) s.trace.clear();
}

}  // namespace mtp::speculative
