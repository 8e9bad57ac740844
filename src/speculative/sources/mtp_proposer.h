// Drafts for one generation with the MTP modules (mtp_chains.h: which rows
// are final, how the modules catch up, how a chain is drafted — one call per
// module per cycle). Trees catch every module up first (mtp_tree.cc).
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "drafter/mtp_runner.h"
#include "speculative/policy/call_cost_fit.h"
#include "speculative/sources/mtp_chains.h"
#include "speculative/cycle/spec_loop.h"
#include "speculative/cycle/target_session.h"
#include "speculative/policy/tree_shape.h"

namespace mtp::speculative {

class MtpProposer : public Proposer {
 public:
  // p_min: stop drafting at a module whose top probability is below it (0 = off).
  // modules: how many modules (0..K-1) are kept up to date and drafted with —
  // the draft length of the loop (0 = all K). Modules beyond it are never run:
  // a K = 4 drafter used with --draft-k 1 costs one module per cycle, not four.
  // sampling: how module k drafts the token at sequence position N + k — the
  // argmax at temperature 0; coupled: the same keyed Gumbel-max the target
  // uses (sampler.h), over the module's own distribution, keyed by the target
  // token id (also within a draft vocabulary); rejection: a sample of the
  // module's distribution q (recorded in the tree for the verifier).
  MtpProposer(const drafter::Drafter& d, TargetSession& target, float p_min, int modules = 0,
              const SamplerOptions& sampling = {}, SpecSampling mode = SpecSampling::Coupled);

  // Draft trees instead of chains (tree_shape.h; Chain = chains). Auto needs
  // a chooser (the caller's: it may outlive this proposer and keep learning
  // across generations). Trees are refused in rejection mode (InputError).
  void set_tree(const TreeOptions& t, TreeChooser* chooser = nullptr);
  const TreeOptions& tree_options() const { return tree_opts_; }
  // Auto: how often each shape was used ("2,2,1" -> cycles).
  const std::map<std::string, long>& shapes_used() const { return shapes_used_; }

  void propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) override;
  void commit(std::span<const int32_t> committed) override;
  // The drafter's share of prompt processing: brings every module up to date
  // with a prompt the target has just prefilled (all but its last token), so
  // the first cycle only adds the first generated token's rows. Optional —
  // propose() catches up by itself — but it lets generate() time this work as
  // prompt processing, like the target's prefill.
  // module_seconds() then restarts at 0: it counts generation only.
  void prefill(std::span<const int32_t> prompt);

  // Module call costs kept by the caller (GateMemory::module_calls: they
  // outlive this generation) instead of this proposer's own.
  void use_call_costs(CallCostByRows& c) { calls_ = &c; }
  // commit() then propose(), as the union drafts after cycles without the
  // drafter. Timed as a whole, as prefill() is (timed()), for draft_seconds;
  // returns the seconds it took.
  double catch_up_and_propose(std::span<const int32_t> committed, int max_k, DraftTree& tree);
  // What drafting a chain of L = 1..max_len would cost now, seconds
  // (by_len[L - 1]): its module calls (MtpChains::draft_calls — the catch-up
  // on every row committed since each module last ran, and the drafting rows)
  // priced by this drafter's calls seen (call_cost_fit.h).
  void draft_seconds(std::span<const int32_t> committed, int max_len,
                     std::vector<double>& by_len);

  // Live draft logits' maxima, per cycle and module, for the live ≡
  // teacher-forced check (bitwise).
  using Draft = MtpDraft;
  const std::vector<Draft>& history() const { return history_; }
  // Seconds spent in each module's forwards (catch-up and drafting).
  const std::vector<double>& module_seconds() const { return module_s_; }

 private:
  // Brings modules [0, min(modules, modules_)) up to date with `committed`.
  void catch_up(std::span<const int32_t> committed, int modules = 1 << 30);
  // The tree drafting of propose() (mtp_tree.cc).
  void propose_tree(std::span<const int32_t> committed, int max_k, DraftTree& tree);
  // Children of `parent` (-1 = root) from a logits row for position pos:
  // the w best, pushed onto the tree; cum: the parent's cumulative probability.
  void add_children(const float* lg, int64_t pos, int parent, int k, size_t w, double cum,
                    DraftTree& tree);
  // The one-sequence job of chains_ (slot 0) for `committed`.
  MtpChains::Job job(std::span<const int32_t> committed, int max_k, DraftTree* tree);

  TargetSession& target_;
  MtpChains chains_;  // one slot
  float p_min_;
  int modules_;  // modules in use: [0, modules_)
  size_t d_;
  std::vector<float> logits_;
  std::vector<model::Row> rows_;
  std::vector<float> h_in_, h_out_;
  std::vector<uint8_t> mask_;
  std::vector<Draft> history_;
  std::vector<double> module_s_;
  CallCostByRows own_calls_;
  CallCostByRows* calls_ = &own_calls_;  // every module call's seconds by rows
  void observe_call(int rows, double seconds);
  // Runs work (module calls) timed as a whole: the work around the calls
  // (their rows' inputs and outputs, drafting from the logits) is spread over
  // the calls' seconds, in proportion, before calls_ learns them — measured
  // on the stories260K drafter, a 40-row catch-up took 1.5-2x its calls.
  double timed(const std::function<void()>& work);  // seconds
  bool timing_draft_ = false;                       // inside timed()
  std::vector<std::pair<int, double>> draft_calls_;  // its calls: rows, seconds
  std::vector<std::pair<int, int>> planned_;        // draft_seconds' scratch: module, rows
  Sampler sampler_;
  SpecSampling mode_;
  // Trees.
  TreeOptions tree_opts_;
  TreeChooser* chooser_ = nullptr;
  std::map<std::string, long> shapes_used_;
  std::vector<double> cum_;                // [node] cumulative draft probability
  std::vector<std::vector<int>> row_of_;   // [k][node]: module k's tree row of node (-1)
  std::vector<std::vector<float>> tree_out_;  // [k][rows · d]: module k's tree rows' h_k
  std::vector<Sampler::Candidate> cand_;
  DraftTree last_tree_;                    // the last proposed tree (auto's observation)
  std::vector<int> last_widths_;
  int last_n_ = -1;
  std::optional<std::chrono::steady_clock::time_point> cycle_started_;  // auto's cycle clock
  std::chrono::steady_clock::time_point proposed_at_;  // the last tree's end (auto's verify clock)
  // A tree's module call (chains_.runner().forward), timed per module.
  void run_module(int k, const float* h_in, float* h_out, float* logits, const uint8_t* mask);
};

}  // namespace mtp::speculative
