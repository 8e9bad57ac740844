#include "speculative/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/memory_headroom.h"
#include "drafter/mtp_runner.h"
#include "speculative/sources/mtp_chains.h"
#include "speculative/scheduler/scheduler_seq.h"

namespace mtp::speculative {

using scheduler_detail::Clock;
using scheduler_detail::kMaxLookupDraft;
using scheduler_detail::mtp_depth0;
using scheduler_detail::seconds;

namespace {
double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Median seconds of one forward of drafter module 0 over q rows with one
// logits row (draft_budget.h: a deeper draft is one such call with few rows;
// a catch-up one with many).
double module_seconds(const model::Model& m, const drafter::Drafter& d, int q, ThreadPool* pool) {
  drafter::MtpRunner runner(m, d, 1, q + 1, std::max(q, 1));
  const size_t D = size_t(m.config().d_model);
  std::vector<float> h_in(size_t(q) * D, 0.1f), h_out(size_t(q) * D);
  std::vector<float> logits(size_t(q) * runner.logits_width());
  std::vector<uint8_t> mask(size_t(q), 0);
  mask.back() = 1;
  std::vector<model::Row> rows;
  for (int i = 0; i < q; ++i) rows.push_back({0, i, int32_t((3 + i) % m.config().vocab)});
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = Clock::now();
    runner.forward(0, rows, h_in.data(), h_out.data(), logits.data(), mask.data(), pool);
    t.push_back(seconds(t0, Clock::now()));
    runner.kv(0).truncate(0, 0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

namespace {
// Positions per slot: --ctx (0: min(model maximum, 2048)), refused when all
// slots' target K/V and capture hidden — and, with a drafter, its modules'
// K/V and outputs (allocated for every slot at start) — would not fit in
// available memory.
int slot_ctx(const model::ModelConfig& c, const SchedulerOptions& opt,
             const drafter::Drafter* d) {
  const int ctx = resolve_ctx(c, opt.ctx > 0 ? opt.ctx : std::min(c.max_position, 2048));
  double per_pos = (double(c.n_layers) * c.n_kv_heads * c.head_dim * 2 + c.d_model) * sizeof(float);
  if (d) {
    const model::ModelConfig& b = d->block_config();
    per_pos += double(d->config().K) *
               (double(b.n_layers) * b.n_kv_heads * b.head_dim * 2 + c.d_model) * sizeof(float);
  }
  const double need = per_pos * ctx * std::max(1, opt.parallel);
  const MemoryHeadroom room = memory_headroom();
  if (room.known() && need > room.bytes) {
    fail<InputError>("--parallel {} x --ctx {} needs {:.2f} GiB for the KV caches; {} is available",
                     opt.parallel, ctx, need / (1ull << 30), room.describe());
  }
  return ctx;
}
}  // namespace

Scheduler::Scheduler(const model::Model& m, const io::Tokenizer* tok,
                     const drafter::Drafter* drafter, const SchedulerOptions& opt, ThreadPool* pool)
    : m_(m), tok_(tok), drafter_(drafter), opt_(opt), pool_(pool),
      ctx_(slot_ctx(m.config(), opt, drafter)),
      kv_(m.config(), std::max(1, opt.parallel), ctx_,
          std::max({opt.prefill_chunk, (drafter ? drafter->config().K : 0) + 1,
                    opt.has_lookups() ? std::min(opt.lookup.max_draft, kMaxLookupDraft) + 1 : 0}),
          /*tree_slots=*/0) {  // the scheduler verifies chains
  if (opt.parallel < 1) fail<InputError>("--parallel must be >= 1, got {}", opt.parallel);
  if (opt.prefill_chunk < 1 || opt.prefill_chunk > 64) {
    fail<InputError>("the prefill chunk must be in 1..64, got {}", opt.prefill_chunk);
  }
  if (opt_.max_rows <= 0) opt_.max_rows = std::max(64, opt.parallel * 16);
  slots_.resize(size_t(opt.parallel));
  if (drafter_) chains_.emplace(m, *drafter_, opt.parallel, ctx_);
  if (opt_.has_lookups()) {
    opt_.lookup.validate();
    const int classes = std::max(opt_.lookup.ngram_max, opt_.history ? opt_.history->ngram_max() : 0);
    arms_ = LookupArms(classes, std::min(opt_.lookup.max_draft, kMaxLookupDraft));
  }
  if (drafter_ && opt_.adaptive) {
    // Up to the rows the decode and verify rows of every slot can take (and a
    // little prefill): a big model's 64-row forward is dear to time.
    const int q_curve = std::min({opt_.max_rows, 64, opt.parallel * (drafter->config().K + 1) + 8});
    cost_ = forward_cost_curve(m, q_curve, opt_.cost_reps, pool);
    module_s_ = module_seconds(m, *drafter_, 2, pool);
    module_row_s_ = std::max(0.0, (module_seconds(m, *drafter_, 34, pool) - module_s_) / 32);
  } else if (opt_.has_lookups() && opt_.adaptive) {
    const int q_curve = std::min({opt_.max_rows, 64, opt.parallel * 9 + 8});
    cost_ = forward_cost_curve(m, q_curve, opt_.cost_reps, pool);
  } else {
    cost_ = CostCurve({{1, 1.0}});
  }
}

Scheduler::~Scheduler() = default;

size_t Scheduler::kv_bytes() const {
  const size_t D = size_t(m_.config().d_model);
  size_t per_slot = size_t(ctx_) * D * sizeof(float);  // capture hidden
  if (drafter_) {
    const int K = drafter_->config().K;
    model::KVCache one(drafter_->block_config(), 1, ctx_, 64);
    per_slot += size_t(K) * (one.bytes() + size_t(ctx_) * D * sizeof(float));
  }
  return kv_.bytes() + size_t(opt_.parallel) * per_slot;
}

uint64_t Scheduler::submit(Request r) {
  if (r.prompt.empty()) fail<InputError>("request: the prompt is empty");
  if (int(r.prompt.size()) >= ctx_) {
    fail<InputError>("request: the prompt is {} tokens; the context is {} ({}), which leaves "
                     "no room to generate", r.prompt.size(), ctx_,
                     opt_.ctx > 0 ? "--ctx" : "the model's maximum, or what --parallel sequences fit in memory");
  }
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= m_.config().vocab) {
      fail<InputError>("request: prompt token {} is outside the vocabulary [0, {})", t,
                       m_.config().vocab);
    }
  }
  if (r.gen.n_new < 0) fail<InputError>("request: n_new must be >= 0, got {}", r.gen.n_new);
  r.gen.sampler.validate();
  if (drafter_ && r.speculate) {
    const int K = drafter_->config().K;
    if (r.draft_k == 0) r.draft_k = K;
    if (r.draft_k < 1 || r.draft_k > K) {
      fail<InputError>("request: draft length {} is outside 1..{} (the drafter's K)", r.draft_k, K);
    }
  } else {
    r.draft_k = 0;
    if (!opt_.has_lookups()) r.speculate = false;
  }
  const uint64_t id = next_id_++;
  submitted_at_[id] = now_s();
  queue_.emplace_back(id, std::move(r));
  return id;
}

bool Scheduler::idle() const { return queue_.empty() && active() == 0; }

int Scheduler::active() const {
  return int(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return bool(s); }));
}

uint64_t Scheduler::slot_id(int s) const {
  return slots_.at(size_t(s)) ? slots_[size_t(s)]->id : 0;
}

int Scheduler::slot_committed(int s) const {
  const auto& p = slots_.at(size_t(s));
  if (!p) return 0;
  return p->prefilling() ? p->prefilled + 1 : int(p->committed.size());
}

std::vector<Event> Scheduler::take_events() { return std::exchange(events_, {}); }

void Scheduler::admit() {
  for (size_t s = 0; s < slots_.size(); ++s) {
    // A sequence with nothing to generate (n_new = 0) ends at admission and
    // leaves the slot free for the next one.
    while (!slots_[s] && !queue_.empty()) {
      auto [id, r] = std::move(queue_.front());
      queue_.pop_front();
      start(slots_[s], id, std::move(r));
    }
  }
}

void Scheduler::start(std::unique_ptr<Seq>& slot, uint64_t id, Request r) {
  const int s = int(&slot - slots_.data());
  MTP_CHECK(kv_.length(s) == 0, "slot {} admitted with {} positions held", s, kv_.length(s));
  slot = std::make_unique<Seq>(id, std::move(r), m_, kv_, s, tok_, pool_);
  Seq& q = *slot;
  q.admitted = Clock::now();
  q.queue_s = now_s() - submitted_at_[id];
  submitted_at_.erase(id);
  if (q.req.speculate) {
    q.draft_k = q.req.draft_k;  // 0 without a drafter
    if (opt_.has_lookups()) q.lookup_k = std::min(opt_.lookup.max_draft, kMaxLookupDraft);
    if (opt_.has_lookups()) q.lookups.emplace(opt_.lookup_prompt, opt_.lookup, opt_.history);
    q.spec_k = std::max(q.draft_k, q.lookup_k);
    q.stats.drafted.assign(size_t(q.spec_k), 0);
    q.stats.accepted.assign(size_t(q.spec_k), 0);
    q.counters = AcceptCounters(q.draft_k);
    if (drafter_) q.module_s.assign(size_t(drafter_->config().K), 0.0);
  }
  if (q.sink.done()) finish(s);  // n_new = 0: nothing to generate
}

void Scheduler::emit_new_tokens(Seq& s, size_t before, const DraftTree* tree,
                                const std::vector<int32_t>* accepted) {
  const std::vector<int32_t>& toks = s.sink.tokens();
  for (size_t i = before; i < toks.size(); ++i) {
    Event e;
    e.kind = Event::Kind::Token;
    e.id = s.id;
    e.token = toks[i];
    e.index = int(i);
    const size_t j = i - before;  // the cycle emits the accepted path, then the target's token
    if (tree && accepted && j < accepted->size()) {
      e.drafted = true;
      e.source = tree->source[size_t((*accepted)[j])];
    }
    for (const auto& [idx, t] : s.texts) {
      if (idx == i) e.piece += t;
    }
    events_.push_back(std::move(e));
  }
  s.texts.clear();
}

void Scheduler::finish(int slot) {
  Seq& s = *slots_[size_t(slot)];
  s.closing = true;
  s.sink.close();
  auto r = std::make_shared<SequenceResult>();
  r->id = s.id;
  r->prompt_ids = s.req.prompt;
  r->token_ids = s.sink.tokens();
  r->text = s.sink.text();
  r->finish_reason = s.sink.finish_reason();
  r->timings.n_prompt = int(s.req.prompt.size());
  r->timings.prompt_s = s.prompt_s;
  r->timings.n_gen = int(r->token_ids.size());
  r->timings.gen_s = s.sink.generation_seconds();
  r->queue_s = s.queue_s;
  if (s.req.speculate) {
    const auto [d0, a0] = mtp_depth0(s.stats);
    pool_drafted_ += d0;
    pool_accepted_ += a0;
    r->stats = s.stats;
    r->stats->time_module_s = s.module_s;
  }
  // Earlier outputs of this process (not a cancelled one: the client did not
  // want it).
  if (opt_.history && r->finish_reason != "cancelled") {
    opt_.history->add_request(r->prompt_ids, r->token_ids);
  }
  Event e;
  e.kind = Event::Kind::Finish;
  e.id = s.id;
  e.piece = s.tail;
  e.finish_reason = r->finish_reason;
  e.result = std::move(r);
  events_.push_back(std::move(e));
  slots_[size_t(slot)].reset();
  kv_.truncate(slot, 0);  // the slot's K/V is free for the next sequence
  if (chains_) chains_->release(slot);
}

bool Scheduler::cancel(uint64_t id) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->first != id) continue;
    auto r = std::make_shared<SequenceResult>();
    r->id = id;
    r->prompt_ids = it->second.prompt;
    r->finish_reason = "cancelled";
    r->queue_s = now_s() - submitted_at_[id];
    submitted_at_.erase(id);
    queue_.erase(it);
    Event e;
    e.kind = Event::Kind::Finish;
    e.id = id;
    e.finish_reason = "cancelled";
    e.result = std::move(r);
    events_.push_back(std::move(e));
    return true;
  }
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s] && slots_[s]->id == id) {
      slots_[s]->sink.finish("cancelled");
      finish(int(s));
      return true;
    }
  }
  return false;
}

void Scheduler::cancel_all() {
  while (!queue_.empty()) cancel(queue_.front().first);
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s]) cancel(slots_[s]->id);
  }
}

bool Scheduler::step() {
  admit();
  if (active() == 0) return false;
  plan_and_forward();
  return true;
}

void Scheduler::run() {
  while (step()) {
  }
}

void Scheduler::plan_and_forward() {
  const size_t V = size_t(m_.config().vocab), D = size_t(m_.config().d_model);
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
  double first_tokens = 0;
  for (size_t i = 0; i < pre.size(); ++i) {
    const int left = int(pre[i]->req.prompt.size()) - pre[i]->prefilled;
    const int room = std::max(opt_.max_rows - rows, rows == 0 ? 1 : 0);
    chunk[i] = std::min({left, opt_.prefill_chunk, room});
    rows += chunk[i];
    if (chunk[i] == left) first_tokens += 1;
  }
  std::vector<int> k = plan_drafts(dec, rows);
  draft(dec, k);
  // Lay out the rows.
  rows_.clear();
  mask_.clear();
  for (size_t i = 0; i < dec.size(); ++i) {
    Seq& s = *dec[i];
    s.tree = &s.spec->draft(k[i]);  // the prepared drafts
    MTP_CHECK(s.target.forwarded() == int(s.committed.size()) - 1,
              "sequence {}: the target has forwarded {} positions, expected {}", s.id,
              s.target.forwarded(), s.committed.size() - 1);
    s.row0 = rows_.size();
    s.nrows = int(s.tree->size()) + 1;
    const int32_t pos = s.target.forwarded();
    rows_.push_back({s.target.seq(), pos, s.committed.back()});
    for (size_t j = 0; j < s.tree->size(); ++j) {
      rows_.push_back({s.target.seq(), pos + int32_t(j) + 1, s.tree->token[j]});
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
  if (drafter_ && opt_.adaptive) cost_.observe(int(rows_.size()), fwd_s);
  for (auto& p : slots_) {
    if (!p) continue;
    for (int j = 0; j < p->nrows; ++j) {
      const size_t r = p->row0 + size_t(j);
      std::memcpy(p->target.hidden_row(rows_[r].pos), hidden_.data() + r * D, D * sizeof(float));
    }
  }
  // Prefill: the last prompt row's logits give the first token (as generate()).
  for (Seq* sp : pre) {
    Seq& s = *sp;
    const size_t last = s.row0 + size_t(s.nrows) - 1;
    s.prefilled += s.nrows;
    s.nrows = 0;
    if (s.prefilling()) continue;
    // The drafter catches up with the prompt lazily, in its first propose():
    // a sequence the budget never gives a draft costs no module forward.
    s.prompt_s = seconds(s.admitted, Clock::now());
    const size_t before = s.sink.tokens().size();
    const int32_t t = s.sampler.sample(logits_.data() + last * V, V, int64_t(s.committed.size()));
    if (s.sink.push(t)) {
      s.committed.push_back(t);
      s.spec.emplace(s.req.speculate ? static_cast<Proposer&>(s.prepared) : s.none, s.committed,
                     s.sink, std::max(1, s.spec_k), ctx_, s.stats, nullptr);
    }
    emit_new_tokens(s, before, nullptr, nullptr);
    if (s.sink.done() || s.spec->done()) finish(s.target.seq());
  }
  // Verify: accept, emit, roll back the rejected rows' K/V.
  for (Seq* sp : dec) {
    Seq& s = *sp;
    s.verifier.choose_all(s.committed, *s.tree, logits_.data() + s.row0 * V, s.choices);
    s.nrows = 0;
    if (s.spec_k > 0) s.stats.time_verify_s += fwd_s;
    const size_t before = s.sink.tokens().size(), n_before = s.committed.size();
    s.spec->accept(s.choices);
    s.counters.step();  // the drafter's counters learn from its own chains only
    if (!s.tree->empty() && s.tree->source[0].kind == DraftSource::Kind::Mtp) {
      s.counters.add(s.tree->max_depth(), int(s.spec->accepted_nodes().size()));
    }
    if (s.lookups) {
      s.lookups->judge(arms_, s.chosen, int(s.tree->size()),
                       int(s.spec->accepted_nodes().size()), s.committed, n_before);
    }
    emit_new_tokens(s, before, s.tree, &s.spec->accepted_nodes());
    if (!s.sink.done()) {
      s.verifier.commit(s.committed, s.spec->accepted_nodes());
      // The drafter catches up lazily, in its next propose(): a sequence the
      // budget gives no drafts skips its module forwards meanwhile.
    }
    if (s.spec->done()) finish(s.target.seq());
  }
}

}  // namespace mtp::speculative
