// The speculative decoding cycle, independent of what drafts and what verifies
// (llama.cpp-style lifecycle with per-position counters). The MTP engine, the
// drift harness's oracle and the tests' scripted targets/drafters all plug in
// here, so the accept/emit logic exists once and is tested in isolation.
//
// One cycle, with committed tokens tok[0..N-1] (the target has forwarded
// 0..N-2; tok[N-1] is "next"):
//   1. proposer.propose: a DraftTree (draft_tree.h) of up to max_k levels
//      continuing tok — a chain d_0..d_{k-1} in the simple case.
//   2. verifier.verify: the target forwards [next, every node] in ONE call and
//      returns its own choice after the root and after each node's path.
//   3. accept the longest root path whose tokens equal the target's choices
//      (DraftTree::accept); emit its tokens then the target's next choice (the
//      correction, or the bonus token at a leaf) — each through the sink,
//      which may end generation at any of them (never one too many).
//   4. verifier.commit / proposer.commit with the new committed sequence
//      (N + a + 1 tokens): the target keeps the accepted nodes' K/V and drops
//      the rest; the proposer catches up on the newly final rows.
// Drafts are clipped so the committed sequence never exceeds ctx.
//
// Several sequences: SpecSequence is one sequence's cycle as a state machine
// (draft -> [verify elsewhere] -> accept -> commit), so a scheduler can put the
// verify rows of many sequences into one forward; speculative_loop() drives
// one sequence with one Verifier.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "speculative/cycle/draft_tree.h"
#include "speculative/cycle/token_sink.h"

namespace mtp::speculative {

class Verifier {
 public:
  virtual ~Verifier() = default;
  // choices[0] = the target's token after `committed`; choices[i + 1] = its
  // token after committed + the path to tree node i. Forwards the last
  // committed token and every node in one call.
  virtual void verify(std::span<const int32_t> committed, const DraftTree& tree,
                      std::vector<int32_t>& choices) = 0;
  // The committed sequence is now `committed` (its last token not yet
  // forwarded); `accepted` are the tree nodes kept, root path order.
  virtual void commit(std::span<const int32_t> committed, std::span<const int32_t> accepted) = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // A tree of at most max_k levels continuing `committed` (empty is fine).
  virtual void propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) = 0;
  // The committed sequence after a cycle's verify.
  virtual void commit(std::span<const int32_t> committed) = 0;
  // Whether the proposer fills SpecStats::sources' proposed / chosen /
  // time_s itself: the engine's prepared drafts (proposed outside the cycle,
  // several sources judged, one verified). Otherwise SpecSequence credits them
  // to the sources of the trees it gets (SpecSequence::draft, commit_proposer).
  virtual bool counts_sources() const { return false; }
};

// A proposer of chains: implement propose_chain; its drafts become a chain
// tree attributed to `source` (node i to {source, i}).
class ChainProposer : public Proposer {
 public:
  explicit ChainProposer(const char* source) : source_(source) {}
  virtual void propose_chain(std::span<const int32_t> committed, int max_k,
                             std::vector<int32_t>& drafts) = 0;
  void propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) final;

 private:
  const char* source_;
  std::vector<int32_t> drafts_;
};

// Counters by depth: drafted[k] counts cycles whose tree reached depth k + 1
// (for a chain: drafts at position k that were verified), accepted[k] those
// whose accepted path did.
// Per source (SpecStats::sources) also: tokens proposed (verified or not),
// cycles it was chosen (of them probes) and seconds spent drafting.
struct DepthCounts {
  std::vector<long> drafted, accepted;
  long proposed = 0, chosen = 0, probes = 0;
  double time_s = 0;
  void resize(size_t n);
  std::vector<double> acceptance() const;  // accepted[k] / drafted[k]
  long verified() const;                   // Σ drafted
  long accepted_total() const;             // Σ accepted
};

struct SpecStats {
  long cycles = 0;
  std::vector<long> drafted;   // [k]: see DepthCounts
  std::vector<long> accepted;  // [k]
  long emitted = 0;            // tokens emitted by cycles
  long nodes = 0;              // draft nodes verified (a chain: its length)
  double time_draft_s = 0, time_verify_s = 0, time_other_s = 0;
  std::vector<double> time_module_s;  // [k]: drafter module k's forwards (when known)
  // Per source (DraftOrigin::name()): its nodes verified / accepted by depth.
  std::map<std::string, DepthCounts> sources;
  // [a]: cycles whose accepted path had a nodes.
  std::vector<long> accepted_length_hist;
  // Trees (tree_shape.h): the shape asked for ("chain", "2,2,1", "budget 16",
  // "auto") and, for auto, the cycles each chosen shape ran.
  std::string tree = "chain";
  std::map<std::string, long> tree_shapes;

  std::vector<double> acceptance() const;  // accepted[k] / drafted[k]
  double tokens_per_cycle() const;         // emitted / cycles
  double nodes_per_cycle() const;          // nodes / cycles
  // this += x: every counter and time (vectors grow to the longer one).
  void add(const SpecStats& x);
  nlohmann::json to_json() const;
};

// One cycle's record: the live ≡ teacher-forced check, the tests, and
// `--trace FILE` (one JSON line per cycle per sequence, to_json(); the
// engine fills what the cycle does not know). docs/SEMANTICS.md, "Trace".
struct CycleTrace {
  uint64_t id = 0;                // the sequence (request id; 0 outside the engine)
  int n_committed = 0;            // N at the start of the cycle
  std::vector<int32_t> drafts;    // the verified tree's tokens (a chain: d_0 .. d_{k-1})
  std::vector<int32_t> parents;   // the tree's parents
  std::vector<DraftOrigin> source;  // the tree's sources
  std::vector<float> scores;      // per node: its source's score (a model source: the
                                  // largest logit of the row that drafted it); may be empty
  std::vector<int32_t> choices;   // the target's: after the root, then after each node
  std::vector<int32_t> accepted_nodes;
  int accepted = 0;               // a = accepted_nodes.size()
  // Every proposal of the cycle, verified or not (the free sources propose
  // every cycle): its source, evidence class and tokens.
  struct Proposal {
    const char* source = "";
    int evidence = 0;
    std::vector<int32_t> tokens;
  };
  std::vector<Proposal> proposals;
  nlohmann::json to_json() const;
};

// One sequence's speculative generation, a cycle at a time. Stats and trace
// are the caller's (trace may be null).
class SpecSequence {
 public:
  SpecSequence(Proposer& proposer, std::vector<int32_t>& committed, TokenSink& sink, int max_k,
               int ctx, SpecStats& stats, std::vector<CycleTrace>* trace);

  // Generation has ended (sink done, or the context is full: finish "context").
  bool done();
  // 1. The tree to verify this cycle (may be empty: then a plain decode step).
  const DraftTree& draft() { return draft(max_k_); }
  // The same with this cycle's draft length limited to max_k (0 <= max_k <=
  // the constructor's; 0 = no drafting, a plain decode step): a scheduler
  // chooses it per cycle from the cost of extra rows.
  const DraftTree& draft(int max_k);
  // 3. The verifier's choices for that tree: accepts, emits, records stats.
  void accept(std::span<const int32_t> choices);
  // The nodes the last accept() kept (for Verifier::commit).
  const std::vector<int32_t>& accepted_nodes() const { return acc_.nodes; }
  // The longest draft draft(max_k) asks the proposer for: max_k clipped so
  // the committed sequence never exceeds ctx (0: no draft).
  int draft_limit(int max_k) const;
  // 4b. The proposer's catch-up after the verifier committed.
  void commit_proposer();

  const std::vector<int32_t>& committed() const { return committed_; }

 private:
  Proposer& proposer_;
  std::vector<int32_t>& committed_;
  TokenSink& sink_;
  int max_k_, ctx_;
  SpecStats& stats_;
  std::vector<CycleTrace>* trace_;
  DraftTree tree_;
  DraftTree::Accepted acc_;
};

// Runs cycles until the sink is done or the context is full. `committed`
// is updated in place. max_k >= 1.
void speculative_loop(Verifier& verifier, Proposer& proposer, std::vector<int32_t>& committed,
                      TokenSink& sink, int max_k, int ctx, SpecStats& stats,
                      std::vector<CycleTrace>* trace = nullptr);

}  // namespace mtp::speculative
