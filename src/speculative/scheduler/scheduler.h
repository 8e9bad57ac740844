// THE speculative engine: one sequence or many, every draft source, chains
// and trees. `generate()` (generate.h) is this engine with one slot; `serve`,
// the C API and `generate --prompts --parallel` run it with several. Each
// sequence gets exactly the tokens plain generation gives it (greedy and
// coupled sampling), whatever else runs and whatever the policy drafts.
//
// Sequences are submitted (prompt ids, sampling, limits) and wait for one of
// `parallel` slots; each slot is one sequence of ONE multi-sequence KV cache
// of `ctx` positions (plus each source's per-slot state). Each step():
//   1. admits waiting sequences into free slots (FIFO; no preemption);
//   2. plans (scheduler_plan.cc, policy/draft_budget.h): every free source
//      (sources/draft_source.h: a lookup, a registered source) proposes for
//      every speculating sequence in one call per source; the priced source
//      (a drafter: at most one per engine) is valued from its live
//      acceptance and measured cost without proposing yet; each sequence
//      gets the option of most expected tokens per second — a free
//      proposal, the drafter's chain or tree, or none — and the budget sizes
//      the chains of all sequences from the measured cost of extra rows m(q),
//      so speculation shrinks as the batch fills; then the priced source
//      drafts for the sequences that chose it, in ONE call;
//   3. forms ONE Model::forward from every active sequence's rows: prefill
//      chunks, and [next, drafts...] verify rows (tree rows for trees; no
//      drafts: a plain decode row);
//   4. accepts, emits tokens (TokenSink: docs/SEMANTICS.md's stop rules),
//      rolls back rejected K/V (or keeps an accepted tree path), records the
//      trace, and frees the slots of finished sequences.
//
// Identity (docs/SEMANTICS.md): a row's logits and hidden depend on its own
// sequence only (batch-invariant forward), draws are keyed by (seed,
// position, token), and accepted drafts equal the target's own choices — so
// greedy and coupled outputs equal plain generation's. Rejection sampling
// depends on the drafts: the same distribution, no identity claim.
//
// Learning: every free source's proposals are judged against the text as it
// is committed, verified or not, per arm (source × evidence class) pooled
// over sequences (policy/source_arms.h); the priced source's acceptance is
// per sequence (forgetting counters) with the pool's depth-0 rate as prior,
// probed every few steps when the budget stopped drafting. What the engine
// learned persists across the sequences it runs (bench and the server keep
// one engine).
//
// Thread safety: a Scheduler is used by one thread at a time;
// BackgroundScheduler wraps one for use from many threads.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "drafter/drafter.h"
#include "model/forward.h"
#include "speculative/cycle/draft_tree.h"
#include "speculative/cycle/spec_loop.h"
#include "speculative/cycle/token_sink.h"
#include "speculative/policy/draft_budget.h"
#include "speculative/policy/source_arms.h"
#include "speculative/policy/tree_shape.h"
#include "speculative/sources/draft_source.h"
#include "speculative/sources/history.h"
#include "tokenizer/tokenizer.h"

namespace mtp::speculative {

// One cycle record per verify of a sequence (CycleTrace::to_json is its line);
// called on the engine's thread, after the cycle's accept.
using TraceFn = std::function<void(const CycleTrace&)>;

struct SchedulerOptions {
  int parallel = 4;        // slots (sequences decoding at once)
  int ctx = 0;             // positions per sequence (0: the model's maximum,
                           // capped so all slots fit in the memory budget)
  int max_rows = 0;        // rows per forward (0: parallel * 16, at least 64)
  int prefill_chunk = 64;  // prefill rows of one sequence per step (1..64)
  // Draft lengths from the cost curve and live acceptance. false: every
  // sequence verifies its best option at full length every cycle (no
  // break-even; tests force deep verify rows with it).
  bool adaptive = true;
  // Extra rounds of the m(q) timing at start (0: one round after the timer's
  // prefill, which pages the weights in; the curve then follows the live
  // forwards, CostCurve::observe).
  int cost_reps = 0;
  // The priced source's longest draft for every sequence (the MTP modules in
  // use: a K = 4 drafter with 1 runs one module); 0: its longest.
  int draft_k = 0;
  // The draft sources, by registered name, in order (sources/draft_source.h:
  // "mtp" — needs the drafter —, "prompt", "history", "gemma4-assistant" —
  // needs the assistant —, or a registered one). Empty: {"mtp"} with a
  // drafter, {"gemma4-assistant"} with an assistant, none without (plain
  // decoding). At most one priced source.
  std::vector<std::string> sources;
  LookupOptions lookup;                   // the lookups' ngram_max and max_draft
  std::shared_ptr<HistoryStore> history;  // the "history" source's store (null: its own)
  // Gemma 4's assistant (the source "gemma4-assistant"; with no sources
  // named, the one drafted with). Null: none.
  std::shared_ptr<const drafter::Gemma4Assistant> assistant;
  // Draft trees from the priced source (policy/tree_shape.h; Chain = chains).
  TreeOptions tree;
  // m(q), seconds of a q-row forward (absent: timed at start when anything
  // speculates and `adaptive`), followed live (CostCurve::observe) unless
  // learn_costs is false (tests: a fixed policy whatever the machine does).
  std::optional<CostCurve> cost;
  bool learn_costs = true;
  TraceFn trace;  // null: no trace, no cost
};

struct Request {
  std::vector<int32_t> prompt;  // token ids (non-empty)
  int n_new = 128;              // new tokens at most (the caller resolves it: resolve_n_new)
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings
  bool speculate = true;          // use the engine's sources (if any)
  int draft_k = 0;                // the priced source's longest draft (0: its longest)
  float p_min = 0.f;              // a model source stops below this top probability
  SpecSampling mode = SpecSampling::Coupled;
  // Per-token callbacks, on the engine's thread, synchronously (generate():
  // streaming; on_token may cancel by returning false). Optional.
  TextCallback on_text;
  TokenCallback on_token;
  bool record_trace = false;  // keep every cycle in SequenceResult::trace
};

// Generation timings: tok/s = (generated − 1) / (time from the first to the
// last generated token); prompt processing — the target's prefill and a
// drafter's pass over the prompt — apart.
struct Timings {
  int n_prompt = 0, n_gen = 0;
  double prompt_s = 0, gen_s = 0;
  double prompt_tok_s() const { return prompt_s > 0 ? n_prompt / prompt_s : 0; }
  double gen_tok_s() const { return n_gen > 1 && gen_s > 0 ? (n_gen - 1) / gen_s : 0; }
};

struct SequenceResult {
  uint64_t id = 0;
  std::vector<int32_t> prompt_ids, token_ids;
  std::string text, finish_reason;
  Timings timings;                 // prompt_s: admission to first token; gen_s: first to last token
  double queue_s = 0;              // submission to admission
  std::optional<SpecStats> stats;  // when it speculated
  std::vector<CycleTrace> trace;   // Request::record_trace
};

// One emitted token, or the end of a sequence.
struct Event {
  enum class Kind { Token, Finish } kind = Kind::Token;
  uint64_t id = 0;
  int32_t token = -1;  // Token: the token id
  int index = 0;       // Token: its index among the generated tokens
  // Text that became final with this event: complete UTF-8, held back while
  // it could start a stop string (Finish: whatever was held back). May be empty.
  std::string piece;
  bool drafted = false;       // Token: accepted from a draft (else the target's own)
  DraftOrigin source;         // Token, when drafted: who drafted it
  std::string finish_reason;  // Finish: eos | length | stop | context | cancelled
  std::shared_ptr<const SequenceResult> result;  // Finish: the whole sequence
};

class Scheduler {
 public:
  // tok may be null (token ids only: no text, no stop strings); drafter may be
  // null. Makes the sources (InputError for an unknown one, two priced ones, a
  // tree without a tree source or on a target that cannot verify trees) and
  // times m(q) and the priced source's cost when anything speculates.
  Scheduler(const model::Model& m, const io::Tokenizer* tok, const drafter::Drafter* drafter,
            const SchedulerOptions& opt, ThreadPool* pool);
  ~Scheduler();

  // Validates (InputError: empty prompt, prompt >= ctx, token outside the
  // vocabulary, n_new < 0, sampling, draft_k outside 1..the priced source's
  // longest, a tree in rejection mode) and queues a sequence; returns its id.
  uint64_t submit(Request r);
  // Ends a waiting or running sequence with finish "cancelled" (its Finish
  // event is queued); frees its slot and K/V at once. False if unknown or done.
  bool cancel(uint64_t id);
  // One scheduling step (at most one target forward). False when there was
  // nothing to do.
  bool step();
  void run();  // steps until every submitted sequence has finished
  bool idle() const;

  // Events since the last call, in order (per sequence: its tokens in order,
  // then its Finish).
  std::vector<Event> take_events();
  void cancel_all();

  int parallel() const { return opt_.parallel; }
  int ctx() const { return ctx_; }
  int active() const;  // sequences holding a slot
  size_t waiting() const { return queue_.size(); }
  bool speculates() const { return !sources_.empty(); }
  // The priced source's longest draft (0: none) and the longest of all.
  int priced_len() const { return priced_ ? priced_->max_len() : 0; }
  int max_len() const { return max_len_; }
  const std::vector<std::unique_ptr<DraftSource>>& sources() const { return sources_; }
  // Memory held for all slots: the target's K/V and capture hidden, and the
  // drafter's module caches and outputs.
  size_t kv_bytes() const;
  // Of it, one slot's recurrent state (a target with recurrent layers; 0 otherwise).
  size_t recurrent_bytes_per_seq() const { return kv_.recurrent_bytes_per_seq(); }
  const CostCurve& cost_curve() const { return cost_; }
  long forwards() const { return forwards_; }
  long forward_rows() const { return forward_rows_; }
  double forward_seconds() const { return forward_s_; }
  double draft_seconds() const { return draft_s_; }
  // The priced source's cost as measured at start (zero when the budget is
  // off: nothing measured).
  DraftSource::Cost priced_cost() const { return priced_cost_; }
  int slot_length(int s) const { return kv_.length(s); }
  uint64_t slot_id(int s) const;
  int slot_committed(int s) const;
  // The tree chooser (--tree auto; null otherwise).
  const TreeChooser* tree_chooser() const { return chooser_ ? &*chooser_ : nullptr; }

 private:
  struct Seq;
  void make_sources(const drafter::Drafter* drafter);
  void admit();
  void start(std::unique_ptr<Seq>& slot, uint64_t id, Request r);
  void finish(int slot);
  void plan_and_forward();
  void forward_rows(std::span<Seq* const> dec, std::span<Seq* const> pre,
                    std::span<const int> chunk);
  void after_prefill(std::span<Seq* const> pre);
  // alone_since: the step's start, when its one sequence's cycle is the
  // step (the tree chooser learns its costs then); null otherwise.
  void after_verify(std::span<Seq* const> dec, double fwd_s,
                    const std::chrono::steady_clock::time_point* alone_since);
  // scheduler_plan.cc: the free sources' proposals, each sequence's option
  // and draft length (0: none) this step, and the priced source's drafts.
  void propose_free(std::span<Seq* const> dec);
  std::vector<int> plan_drafts(std::span<Seq* const> dec, int rows);
  void draft(std::span<Seq* const> dec, std::span<const int> k);
  void emit_new_tokens(Seq& s, size_t before, const DraftTree* tree,
                       const std::vector<int32_t>* accepted);
  void record_cycle(Seq& s);

  // Makes the sources, then the KV cache their longest drafts need.
  model::KVCache init(const drafter::Drafter* drafter);

  const model::Model& m_;
  const io::Tokenizer* tok_;
  SchedulerOptions opt_;
  ThreadPool* pool_;
  int ctx_;
  std::vector<std::unique_ptr<DraftSource>> sources_;
  DraftSource* priced_ = nullptr;      // the priced source (null: none)
  std::vector<DraftSource*> free_;     // the free sources, in order
  int max_len_ = 0;                    // the longest draft of any source
  SourceArms arms_;  // the free sources' live acceptance, pooled over sequences
  model::KVCache kv_;
  CostCurve cost_;
  DraftSource::Cost priced_cost_;      // measured at start
  std::optional<TreeChooser> chooser_;  // --tree auto
  // Measured / modelled priced-source seconds of the steps so far (an
  // average, weight kDraftRatioLive for a new step): scales its costs.
  static constexpr double kDraftRatioLive = 0.1;
  double draft_ratio_ = 1.0;
  long pool_drafted_ = 0, pool_accepted_ = 0;  // priced depth-0 counters of finished sequences
  std::vector<std::unique_ptr<Seq>> slots_;
  std::deque<std::pair<uint64_t, Request>> queue_;
  std::map<uint64_t, double> submitted_at_;
  uint64_t next_id_ = 1;
  std::vector<Event> events_;
  long forwards_ = 0, forward_rows_ = 0;
  double forward_s_ = 0, draft_s_ = 0;
  // Step scratch.
  std::vector<model::Row> rows_;
  std::vector<float> logits_, hidden_;
  std::vector<uint8_t> mask_;
};

// A Scheduler on its own thread. Rules:
// - submit, cancel and stop may be called from any thread, concurrently; each
//   waits at most for the step in progress (one forward) to end.
// - on_event runs on the background thread, never concurrently with itself,
//   after the step that produced the events and without any lock held: it
//   may call submit and cancel (not stop or the destructor).
// - Events of one sequence arrive in order, its Finish last.
class BackgroundScheduler {
 public:
  using Callback = std::function<void(const Event&)>;
  BackgroundScheduler(std::unique_ptr<Scheduler> s, Callback on_event);
  ~BackgroundScheduler();  // stop()

  uint64_t submit(Request r);  // throws InputError like Scheduler::submit
  bool cancel(uint64_t id);
  // Waits until every submitted sequence has finished and its events were delivered.
  void wait_idle();
  // Ends the thread; sequences still running are cancelled (events delivered).
  void stop();
  // The message of an exception a step threw (every sequence was then
  // cancelled); empty if none.
  std::string last_error() const;
  const Scheduler& scheduler() const { return *s_; }

 private:
  void loop();
  bool pending_events() const { return pending_; }

  std::unique_ptr<Scheduler> s_;
  Callback on_event_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  bool stop_ = false, delivering_ = false;
  bool pending_ = false;  // a cancel queued events for the loop to deliver
  std::string error_;
  std::thread thread_;
};

}  // namespace mtp::speculative
