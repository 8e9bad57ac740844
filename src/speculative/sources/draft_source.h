// A draft source: anything that proposes tokens for the target to verify —
// the MTP drafter's modules, prompt lookup, the history store, or a source a
// user registers by name. The speculative engine (scheduler/scheduler.h) runs
// one sequence or many through this one interface; a new kind of drafter is
// one class implementing it, registered under a name (`--draft-source NAME`,
// the C API's and the server's source lists).
//
// Contract:
// - A source only proposes. The target verifies every token, so whatever a
//   source proposes, the output equals plain generation's (greedy and coupled
//   sampling; rejection sampling: the same distribution, with the source's q
//   in DraftTree::dist or a point mass).
// - propose() gets every sequence that wants a proposal this step in ONE call
//   (a model-based source runs one forward per module for all of them); each
//   job's proposal may depend only on that job's own sequence (its committed
//   tokens, its capture, its slot's state) — never on which other jobs share
//   the call — so each sequence's output is independent of the batch.
// - Within one sequence (a slot, from its first propose to release) the
//   committed tokens only grow by appending, except that the tokens a source
//   proposed may be rejected: a source keeps no state built from its own
//   unverified drafts (the MTP modules recompute their non-final rows).
// - capture(): what the source reads from the target (docs/SEMANTICS.md,
//   "Capture"): job.target's committed positions — their pre-norm hidden
//   (TargetSession::hidden), their post-norm hidden (Model::final_norm of
//   it) and their K/V (TargetSession::kv, read in place, never written);
//   the engine refuses a source whose capture it does not provide.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "speculative/cycle/draft_tree.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/target_session.h"
#include "speculative/policy/tree_shape.h"
#include "speculative/sources/lookup.h"

namespace mtp::drafter {
class Drafter;
class Gemma4Assistant;
}

namespace mtp::speculative {

class HistoryStore;

// What a source reads from the target.
enum class Capture : uint8_t {
  Tokens,          // the committed tokens only (lookups, the history store)
  PreNormHidden,   // + the residual stream after the last decoder layer, before
                   //   the final norm, of every forwarded position (our K-module
                   //   MTP drafter: model/forward.h ForwardOut::hidden)
  PostNormHidden,  // + the same after the final norm (Gemma 4's assistant,
                   //   Qwen3.5's MTP head)
  SharedKV,        // + the post-norm hidden and the K/V of the target's last
                   //   K/V-owning layer of each attention kind, read in place
                   //   (Gemma 4's assistant)
  LayerHiddens,    // + several layers' hidden (EAGLE-style drafters)
};
const char* capture_name(Capture c);

// How proposing is paid for, which decides how the policy treats a source:
// - Free: no model forward (a lookup). The engine asks it every step for
//   every speculating sequence, judges every proposal against the text that
//   gets committed (verified or not), and verifies one where its expected
//   tokens are worth the rows (policy/draft_budget.h).
// - Priced: model forwards (a drafter). The engine asks it only for the
//   sequences whose drafts the budget pays for, in one call, after sizing
//   them from the source's measured cost (cost()) and live acceptance.
enum class Pricing : uint8_t { Free, Priced };

// One sequence's part of a propose() call.
struct ProposeJob {
  int slot = 0;                           // 0 .. slots - 1, each at most once per call
  std::span<const int32_t> committed;     // the sequence's tokens; the last not yet forwarded
  const TargetSession* target = nullptr;  // its capture: positions < committed.size() - 1
  int max_len = 0;                        // the longest chain / deepest tree (>= 1)
  const TreeOptions* tree = nullptr;      // a Static or Budget shape (trees() sources); null: a chain
  float p_min = 0;                        // stop below this top probability (model sources; 0: off)
  Sampler* sampler = nullptr;             // model sources' choices (coupled: keyed draws)
  SpecSampling mode = SpecSampling::Coupled;
  DraftTree* out = nullptr;               // the proposal, cleared by the source (empty: none)
  // Out: the proposal's evidence class (0 .. classes() - 1), its score per
  // node (a model source: the largest logit of the row that drafted it, for
  // the trace and the live ≡ teacher-forced check; optional) and this job's
  // share of the call's seconds, in total and per depth (optional, [max depth]).
  int evidence = 0;
  std::vector<float>* scores = nullptr;
  std::vector<double>* depth_seconds = nullptr;
  double seconds = 0;
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  virtual const char* name() const = 0;  // its registered name (static storage)
  virtual Capture capture() const { return Capture::Tokens; }
  virtual Pricing pricing() const { return Pricing::Free; }
  virtual int max_len() const = 0;              // the longest draft it proposes
  virtual bool trees() const { return false; }  // proposes trees when a job asks
  // Evidence classes: proposals of different classes get their own live
  // acceptance (a lookup: its matched suffix length n - 1 — a 4-token match
  // continues right far more often than a 1-token one).
  virtual int classes() const { return 1; }

  virtual void propose(std::span<ProposeJob> jobs) = 0;
  // The jobs' sequences have just had their prompt forwarded (all but its last
  // token): a source with state over the sequence (the MTP modules) may catch
  // up now, so that work is timed as prompt processing. Optional: propose()
  // must catch up by itself.
  virtual void prefill(std::span<ProposeJob> jobs) { (void)jobs; }
  // Slot s's sequence ended: its state is dropped (the slot is reused).
  virtual void release(int slot) { (void)slot; }
  // A sequence finished with `output` after `prompt` (not a cancelled one, nor
  // one that generated nothing): a source may learn from it (the history store).
  virtual void finished(std::span<const int32_t> prompt, std::span<const int32_t> output) {
    (void)prompt, (void)output;
  }

  // Priced sources: seconds of one call of a few rows (per depth drafted;
  // shared by every sequence in the call) and of each further row, measured
  // now (the engine times them once at start and follows them live).
  struct Cost {
    double call_s = 0;
    double row_s = 0;
  };
  virtual Cost measure_cost(ThreadPool* pool) {
    (void)pool;
    return {};
  }
  // Rows a priced source computes per committed token it has not seen (the
  // MTP modules' catch-up: one row per module in use). 0 for the others.
  virtual int catch_up_rows_per_token() const { return 0; }
  // A priced source calls it after each model call it makes: (depth, rows,
  // seconds) — what the engine's tree chooser prices module calls with.
  std::function<void(int depth, int rows, double seconds)> on_call;
};

// A priced source's Cost from its own timed calls: `call(q)` runs one call of
// q rows (one logits row) on scratch state and returns its seconds; the
// median of 7 at q = 2 gives call_s, at q = 34 the rows past it give row_s.
DraftSource::Cost cost_from_calls(const std::function<double(int q)>& call);

// What a source is made from (the engine's resources and settings).
struct SourceContext {
  const model::Model* target = nullptr;
  const drafter::Drafter* drafter = nullptr;  // the drafter file given (may be null)
  // Gemma 4's assistant given (a gemma4_assistant directory; may be null).
  const drafter::Gemma4Assistant* assistant = nullptr;
  int draft_k = 0;  // modules in use (0: the drafter's K); the assistant's draft steps (0: 4)
  int slots = 1, ctx = 0;                     // sequences and positions per sequence held
  LookupOptions lookup;                       // prompt lookup and the history's proposals
  std::shared_ptr<HistoryStore> history;      // the history store (null: none)
};

using SourceFactory = std::function<std::unique_ptr<DraftSource>(const SourceContext&)>;

// Registers a source kind under `name` (letters, digits, '-' and '_'; at most
// 32 characters). InputError when the name is malformed or taken. Thread-safe;
// names stay valid for the life of the process (DraftOrigin points at them).
void register_draft_source(std::string_view name, SourceFactory make, std::string help = "");
// A new source of kind `name`: InputError naming the unknown name and the
// registered ones; the factory's own errors pass through.
std::unique_ptr<DraftSource> make_draft_source(std::string_view name, const SourceContext& c);
// The registered names (the built-ins mtp, prompt, history, gemma4-assistant
// first) and their help.
std::vector<std::pair<std::string, std::string>> draft_sources();
// The registry's stable copy of a name (for DraftOrigin), or null if unknown.
const char* draft_source_name(std::string_view name);

// Registers a source kind at static initialisation:
//   static RegisterDraftSource reg("echo", [](const SourceContext& c) { ... });
struct RegisterDraftSource {
  RegisterDraftSource(std::string_view name, SourceFactory make, std::string help = "") {
    register_draft_source(name, std::move(make), std::move(help));
  }
};

// One slot of a source as a Proposer of the cycle (cycle/spec_loop.h), for
// the harnesses that drive one sequence with a verifier of their own (the
// drift harness, the cycle's tests): each propose() is a one-job call.
class SourceProposer : public Proposer {
 public:
  SourceProposer(DraftSource& s, const TargetSession& target, const SamplerOptions& sampling = {},
                 SpecSampling mode = SpecSampling::Coupled, float p_min = 0.f);
  void propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) override;
  void commit(std::span<const int32_t>) override {}
  const std::vector<float>& last_scores() const { return scores_; }

 private:
  DraftSource& s_;
  const TargetSession& target_;
  Sampler sampler_;
  SpecSampling mode_;
  float p_min_;
  std::vector<float> scores_;
};

}  // namespace mtp::speculative
