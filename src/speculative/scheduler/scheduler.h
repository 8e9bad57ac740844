// Continuous batching with speculation: many sequences share each target
// forward, and each still gets exactly the tokens generate() gives it alone.
//
// Sequences are submitted (prompt ids, sampling, drafter on/off, limits) and
// wait for one of `parallel` slots; each slot is one sequence of ONE
// multi-sequence KV cache of `ctx` positions (plus, with a drafter, the
// drafter's own per-sequence module caches). Each step():
//   1. admits waiting sequences into free slots (FIFO; no preemption: a
//      sequence keeps its slot until it ends, so nothing ever has to resume);
//   2. picks each speculating sequence's draft length from the measured cost
//      of extra rows (draft_budget.h), so speculation shrinks as the batch
//      fills (acceptance: the sequence's own counters, with the depth-0 rate
//      of all sequences so far as prior; while that pool has < 3 samples a
//      sequence's first decode step drafts one token to explore), and drafts
//      (one call per drafter module for all drafting sequences, mtp_chains.h);
//      with lookup sources (SchedulerOptions::lookup_prompt, history), a
//      sequence whose lookup proposal is worth more than the drafter's chain
//      verifies that proposal instead (see "Lookups" below);
//   3. forms ONE Model::forward from the rows of every active sequence:
//      prefill chunks (at most q_max rows each, within the row budget), and
//      [next, drafts...] verify rows of decoding sequences (no drafts: a plain
//      one-token decode);
//   4. accepts, emits tokens (TokenSink: docs/SEMANTICS.md's stop rules),
//      rolls back rejected K/V, and frees the slots of finished sequences.
//
// Identity under load (docs/SEMANTICS.md): a row's logits and hidden are
// functions of its own sequence only (batch-invariant forward), the draws are
// keyed by (seed, position, token) (sampler.h), and accepted drafts equal the
// target's own choices — so with greedy or coupled sampling each sequence's
// tokens equal generate()'s for its request whatever else runs and whatever
// draft lengths the budget picks. Rejection sampling depends on the drafts,
// which depend on load: same distribution, no identity claim.
//
// Lookups (lookup.h, history.h; `serve --lookup`, `generate --prompts
// --lookup`): each decoding sequence asks its sources every step — its own
// prompt lookup, the shared history store — for a chain (free: no forward).
// Their live acceptance is kept per arm (source × matched suffix length),
// pooled over all sequences and judged also when not verified and past the
// depths verified, as later steps commit the text (scheduler_lookups.h). A
// proposal whose net value this step exceeds the drafter chain's (chain_net_value: expected accepted tokens less the decode
// rate times the cost of its rows and, for the drafter, of its module work)
// replaces that chain; the budget then sizes it among all sequences as a
// draft that costs its rows only (BudgetSeq::free). The MTP modules catch up on
// what was committed meanwhile at the sequence's next MTP draft, as after any
// step without one, so live ≡ teacher-forced holds. Without a drafter the
// lookups are the only source. The history store learns every finished
// sequence's prompt and output (not a cancelled one's, nor one that
// generated nothing).
//
// Thread safety: a Scheduler is used by one thread at a time (no internal
// locks); BackgroundScheduler wraps one for use from many threads.
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
#include "tokenizer/tokenizer.h"
#include "model/forward.h"
#include "speculative/policy/draft_budget.h"
#include "speculative/cycle/draft_tree.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/history.h"
#include "speculative/sources/lookup.h"
#include "speculative/sources/mtp_chains.h"
#include "speculative/policy/scheduler_lookups.h"

namespace mtp::speculative {

struct SchedulerOptions {
  int parallel = 4;      // --parallel: slots (sequences decoding at once)
  int ctx = 0;           // --ctx: positions per sequence (0: the model's maximum,
                         // capped so all slots fit in the memory budget)
  int max_rows = 0;      // rows per forward (0: parallel * 16, at least 64)
  int prefill_chunk = 64;  // prefill rows of one sequence per step (<= 64)
  // Draft lengths from the cost curve (false: always each request's draft_k;
  // tests use it to force deep verify rows).
  bool adaptive = true;
  // Extra rounds of the m(q) timing at start. 0: one round after the timer's
  // prefill (which pages the weights in), as --tree auto; the curve then
  // follows the live forwards (CostCurve::observe). Each round costs ~17
  // decodes: on the widened 1 B target 2 extra rounds were 2.5 s of start-up.
  int cost_reps = 0;
  // Lookup sources (see "Lookups" above): prompt lookup per sequence, and the
  // history store (null: none), shared with the caller, which may fill it
  // first (--lookup-corpus); the scheduler adds finished sequences to it.
  bool lookup_prompt = false;
  std::shared_ptr<HistoryStore> history;
  LookupOptions lookup;  // ngram_max, max_draft of both
  bool has_lookups() const { return lookup_prompt || history != nullptr; }
};

struct Request {
  std::vector<int32_t> prompt;  // token ids (non-empty)
  GenerateOptions gen;          // n_new, sampler, stop strings (gen.ctx is ignored)
  bool speculate = true;        // draft with the scheduler's drafter and lookups (if any)
  int draft_k = 0;              // longest draft (0: the drafter's K)
  float p_min = 0.f;            // --draft-p-min
  SpecSampling mode = SpecSampling::Coupled;
};

struct SequenceResult {
  uint64_t id = 0;
  std::vector<int32_t> prompt_ids, token_ids;
  std::string text, finish_reason;
  Timings timings;                 // prompt_s: admission to first token; gen_s as generate()
  double queue_s = 0;              // submission to admission
  std::optional<SpecStats> stats;  // when it speculated
};

// One emitted token, or the end of a sequence.
struct Event {
  enum class Kind { Token, Finish } kind = Kind::Token;
  uint64_t id = 0;
  int32_t token = -1;   // Token: the token id
  int index = 0;        // Token: its index among the generated tokens
  // Text that became final with this event: complete UTF-8, held back while
  // it could start a stop string (Finish: whatever was held back). May be empty.
  std::string piece;
  bool drafted = false;  // Token: accepted from a draft (else the target's own)
  DraftSource source;    // Token, when drafted: who drafted it (MTP module k)
  std::string finish_reason;  // Finish: eos | length | stop | context | cancelled
  std::shared_ptr<const SequenceResult> result;  // Finish: the whole sequence
};

class Scheduler {
 public:
  // tok may be null (token ids only: no text, no stop strings); drafter may be
  // null (no speculation). Measures the cost curve when a drafter is given.
  Scheduler(const model::Model& m, const io::Tokenizer* tok, const drafter::Drafter* drafter,
            const SchedulerOptions& opt, ThreadPool* pool);
  ~Scheduler();

  // Validates (InputError: empty prompt, prompt >= ctx, n_new < 0, sampling,
  // draft_k outside 1..K) and queues a sequence; returns its id (1, 2, ...).
  uint64_t submit(Request r);
  // Ends a waiting or running sequence with finish "cancelled" (its Finish
  // event is queued); frees its slot and K/V at once. False if unknown or done.
  bool cancel(uint64_t id);
  // One scheduling step (at most one target forward). False when there was
  // nothing to do (no waiting or running sequence).
  bool step();
  // Runs steps until every submitted sequence has finished.
  void run();
  bool idle() const;

  // Events since the last call, in order (per sequence: its tokens in order,
  // then its Finish). They accumulate until taken.
  std::vector<Event> take_events();
  // Cancels every waiting and running sequence.
  void cancel_all();

  int parallel() const { return opt_.parallel; }
  int ctx() const { return ctx_; }
  int active() const;  // sequences holding a slot
  size_t waiting() const { return queue_.size(); }
  // Memory held for all slots: the target's K/V, capture hidden and the
  // drafter's module caches and outputs.
  size_t kv_bytes() const;
  const CostCurve& cost_curve() const { return cost_; }
  // Forwards run, and their rows, since construction.
  long forwards() const { return forwards_; }
  long forward_rows() const { return forward_rows_; }
  // Seconds in those forwards, and in the drafter's module calls.
  double forward_seconds() const { return forward_s_; }
  double draft_seconds() const { return draft_s_; }
  // K/V positions held by slot s (tests: a freed slot holds none).
  int slot_length(int s) const { return kv_.length(s); }
  // The sequence in slot s (0: free) and the positions it has committed
  // (prompt + generated; tests: slot_length == committed - 1 once decoding).
  uint64_t slot_id(int s) const;
  int slot_committed(int s) const;

 private:
  struct Seq;
  void admit();
  void start(std::unique_ptr<Seq>& slot, uint64_t id, Request r);
  void finish(int slot);
  void plan_and_forward();
  // The draft length of each decoding sequence `dec` this step (0: none) and
  // its option (Seq::chosen: a lookup proposal, or -1 the drafter's chain),
  // with `rows` the forward's rows before drafts (scheduler_plan.cc).
  std::vector<int> plan_drafts(std::span<Seq* const> dec, int rows);
  // Prepares the chains of the decoding sequences `dec` (k[i] drafts at most)
  // with one call per drafter module for all of them.
  void draft(std::span<Seq* const> dec, std::span<const int> k);
  void emit_new_tokens(Seq& s, size_t before, const DraftTree* tree,
                       const std::vector<int32_t>* accepted);

  const model::Model& m_;
  const io::Tokenizer* tok_;
  const drafter::Drafter* drafter_;
  SchedulerOptions opt_;
  ThreadPool* pool_;
  int ctx_;
  model::KVCache kv_;
  CostCurve cost_;
  std::optional<MtpChains> chains_;  // the drafter's modules of every slot
  double module_s_ = 0;      // one drafter module forward of a few rows
  double module_row_s_ = 0;  // each further row of a module forward
  // Measured / modelled drafter seconds of the steps so far (an average,
  // weight kDraftRatioLive for a new step): scales the budget's drafter costs.
  static constexpr double kDraftRatioLive = 0.1;
  double draft_ratio_ = 1.0;
  long pool_drafted_ = 0, pool_accepted_ = 0;  // MTP depth-0 counters of finished sequences
  LookupArms arms_;  // the lookups' live acceptance, pooled over sequences
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
