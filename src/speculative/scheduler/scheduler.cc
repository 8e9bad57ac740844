#include "speculative/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/memory_headroom.h"
#include "speculative/policy/forward_timing.h"
#include "speculative/sources/mtp_source.h"
#include "speculative/scheduler/scheduler_seq.h"

namespace mtp::speculative {

using scheduler_detail::Clock;
using scheduler_detail::depth0;
using scheduler_detail::kMaxFreeDraft;
using scheduler_detail::seconds;

namespace {
double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Positions per slot: the requested context (0: min(model maximum, 2048)),
// refused when all slots' target K/V, recurrent state and capture hidden —
// and, with a drafter, its modules' K/V and outputs (allocated for every
// slot at start) — would not fit in available memory.
int slot_ctx(const model::ModelConfig& c, const SchedulerOptions& opt,
             const drafter::Drafter* d) {
  const int ctx = resolve_ctx(c, opt.ctx > 0 ? opt.ctx : std::min(c.max_position, 2048));
  const double need = slot_bytes(c, ctx, d) * std::max(1, opt.parallel);
  const MemoryHeadroom room = memory_headroom();
  if (room.known() && need > room.bytes) {
    fail<InputError>("{} sequences x {} positions need {:.2f} GiB for the KV caches; {} is "
                     "available", opt.parallel, ctx, need / (1ull << 30), room.describe());
  }
  return ctx;
}

// The sources to make: as given, or the drafter alone.
std::vector<std::string> source_names(const SchedulerOptions& opt, const drafter::Drafter* d) {
  if (!opt.sources.empty()) return opt.sources;
  if (d) return {kMtpSource};
  if (opt.assistant) return {kAssistantSource};
  return {};
}

// Rows of one sequence in one forward: a prefill chunk, or a verify of the
// longest draft (a chain's length, a tree's nodes) and its root.
int rows_per_seq(const SchedulerOptions& opt, int longest, int tree_nodes) {
  return std::max({opt.prefill_chunk, longest + 1, tree_nodes + 1});
}

// A tree shape's nodes at most (auto and budget: max_nodes or the budget).
int tree_nodes(const TreeOptions& t) {
  switch (t.kind) {
    case TreeOptions::Kind::Chain: return 0;
    case TreeOptions::Kind::Static: return TreeOptions::nodes(t.widths);
    case TreeOptions::Kind::Budget: return t.budget;
    case TreeOptions::Kind::Auto: return t.max_nodes;
  }
  return 0;
}
}  // namespace

Scheduler::Scheduler(const model::Model& m, const io::Tokenizer* tok,
                     const drafter::Drafter* drafter, const SchedulerOptions& opt, ThreadPool* pool)
    : m_(m), tok_(tok), opt_(opt), pool_(pool), ctx_(slot_ctx(m.config(), opt, drafter)),
      kv_(init(drafter)) {
  const int nodes = tree_nodes(opt_.tree);
  slots_.resize(size_t(opt_.parallel));
  if (opt_.cost) {
    cost_ = *opt_.cost;
  } else if (speculates() && opt_.adaptive) {
    // Up to the rows the verify rows of every slot can take (and a little
    // prefill): a big model's 64-row forward is dear to time.
    const int per_seq = std::max(priced_ ? priced_len() + 1 : 0, free_.empty() ? 0 : 9);
    const int q_curve = std::min({opt_.max_rows, 64, opt_.parallel * std::max(per_seq, nodes + 1) + 8});
    cost_ = forward_cost_curve(m, q_curve, opt_.cost_reps, pool);
  } else {
    cost_ = CostCurve({{1, 1.0}});
  }
  if (priced_ && opt_.adaptive) priced_cost_ = priced_->measure_cost(pool);
  if (opt_.tree.kind == TreeOptions::Kind::Auto) {
    chooser_.emplace(make_tree_chooser(m, opt_.tree, priced_len(), pool));
    priced_->on_call = [this](int, int rows, double s) { chooser_->observe_module(rows, s); };
  }
}

model::KVCache Scheduler::init(const drafter::Drafter* drafter) {
  if (opt_.parallel < 1) fail<InputError>("the number of slots must be >= 1, got {}", opt_.parallel);
  if (opt_.prefill_chunk < 1 || opt_.prefill_chunk > 64) {
    fail<InputError>("the prefill chunk must be in 1..64, got {}", opt_.prefill_chunk);
  }
  if (opt_.max_rows <= 0) opt_.max_rows = std::max(64, opt_.parallel * 16);
  make_sources(drafter);
  return m_.make_cache(opt_.parallel, ctx_,
                       rows_per_seq(opt_, max_len_, tree_nodes(opt_.tree)),
                       opt_.tree.is_tree() ? -1 : 0);
}

void Scheduler::make_sources(const drafter::Drafter* drafter) {
  SourceContext c;
  c.draft_k = opt_.draft_k;
  c.target = &m_;
  c.drafter = drafter;
  c.assistant = opt_.assistant.get();
  c.slots = opt_.parallel;
  c.ctx = ctx_;
  c.lookup = opt_.lookup;
  c.history = opt_.history;
  std::vector<int> classes;
  for (const std::string& name : source_names(opt_, drafter)) {
    for (const auto& s : sources_) {
      if (name == s->name()) fail<InputError>("the draft source '{}' is named twice", name);
    }
    std::unique_ptr<DraftSource> s = make_draft_source(name, c);
    // Every forwarded position's pre-norm hidden is kept (TargetSession), the
    // post-norm one is its final norm, and the K/V are the cache's own.
    if (s->capture() == Capture::LayerHiddens) {
      fail<InputError>("the draft source '{}' reads the target's {}, which this engine does not "
                       "capture", name, capture_name(s->capture()));
    }
    if (s->pricing() == Pricing::Priced) {
      if (priced_) {
        fail<InputError>("draft sources '{}' and '{}' both run models; at most one may",
                         priced_->name(), name);
      }
      priced_ = s.get();
    } else {
      free_.push_back(s.get());
      classes.push_back(s->classes());
    }
    max_len_ = std::max(max_len_, std::min(s->max_len(), s->pricing() == Pricing::Free
                                                             ? kMaxFreeDraft
                                                             : s->max_len()));
    sources_.push_back(std::move(s));
  }
  if (opt_.tree.is_tree()) {
    if (!priced_ || !priced_->trees()) {
      fail<InputError>("draft trees ({}) need a draft source that proposes trees (mtp, gemma4-assistant); the "
                       "sources are: {}", opt_.tree.describe(), source_names(opt_, drafter).empty()
                           ? std::string("none") : fmt::format("{}", fmt::join(source_names(opt_, drafter), ", ")));
    }
    if (!m_.verifies_trees()) {
      fail<InputError>("this target cannot verify draft trees (a layer keeps recurrent state)");
    }
    if (opt_.tree.kind == TreeOptions::Kind::Static && opt_.tree.depth() > priced_->max_len()) {
      fail<InputError>("the draft tree {} is {} deep; the drafter drafts at most {} (one module "
                       "per depth)", opt_.tree.describe(), opt_.tree.depth(), priced_->max_len());
    }
  }
  arms_ = SourceArms(classes, std::min(max_len_, kMaxFreeDraft));
}

Scheduler::~Scheduler() = default;

size_t Scheduler::kv_bytes() const {
  const size_t D = size_t(m_.config().d_model);
  size_t per_slot = size_t(ctx_) * D * sizeof(float);  // capture hidden
  if (const auto* mtp = dynamic_cast<const MtpSource*>(priced_)) {
    const int K = mtp->drafter().config().K;
    model::KVCache one(mtp->drafter().block_config(), 1, ctx_, 64);
    per_slot += size_t(K) * (one.bytes() + size_t(ctx_) * D * sizeof(float));
  }
  return kv_.bytes() + size_t(opt_.parallel) * per_slot;
}

uint64_t Scheduler::submit(Request r) {
  if (r.prompt.empty()) fail<InputError>("request: the prompt is empty");
  if (int(r.prompt.size()) >= ctx_) {
    fail<InputError>("request: the prompt is {} tokens; the context is {} positions ({}), which "
                     "leaves no room to generate", r.prompt.size(), ctx_,
                     opt_.ctx > 0 ? "as requested"
                                  : "the model's maximum, or what the sequences fit in memory");
  }
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= m_.config().vocab) {
      fail<InputError>("request: prompt token {} is outside the vocabulary [0, {})", t,
                       m_.config().vocab);
    }
  }
  if (r.n_new < 0) fail<InputError>("request: n_new must be >= 0, got {}", r.n_new);
  r.sampler.validate();
  if (!speculates()) r.speculate = false;
  if (r.speculate && priced_) {
    r.draft_k = resolve_draft_k(r.draft_k, priced_->max_len(),
                                "the longest draft of the priced source");
  } else {
    r.draft_k = 0;
  }
  if (r.speculate && opt_.tree.is_tree() && r.mode == SpecSampling::Rejection &&
      !r.sampler.greedy()) {
    fail<InputError>("request: draft trees need coupled sampling or temperature 0: rejection "
                     "sampling verifies chains only");
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
    q.draft_k = q.req.draft_k;  // 0 without a priced source
    for (const DraftSource* f : free_) q.free_k = std::max(q.free_k, std::min(f->max_len(), kMaxFreeDraft));
    q.spec_k = std::max(q.draft_k, q.free_k);
    q.stats.drafted.assign(size_t(q.spec_k), 0);
    q.stats.accepted.assign(size_t(q.spec_k), 0);
    q.stats.tree = opt_.tree.describe();
    q.counters = AcceptCounters(q.draft_k);
    if (priced_) q.depth_s.assign(size_t(priced_->max_len()), 0.0);
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
    if (priced_) {
      const auto [d0, a0] = depth0(s.stats, priced_->name());
      pool_drafted_ += d0;
      pool_accepted_ += a0;
    }
    r->stats = s.stats;
    r->stats->time_module_s = s.depth_s;
    if (chooser_) r->stats->tree_shapes = s.stats.tree_shapes;
  }
  if (s.req.record_trace) r->trace = std::move(s.trace);
  // Sources may learn from the output (not a cancelled one: the client did
  // not want it).
  if (r->finish_reason != "cancelled" && !r->token_ids.empty()) {
    for (const auto& src : sources_) src->finished(r->prompt_ids, r->token_ids);
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
  for (const auto& src : sources_) src->release(slot);
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

}  // namespace mtp::speculative
