// The draft source "mtp": our K-module MTP drafter (drafter/drafter.h), for
// every slot of the engine. Capture: the target's pre-norm hidden of every
// forwarded position (docs/SEMANTICS.md).
//
// Chains (mtp_chains.h): module 0 catches up on the rows committed since it
// last ran and its last final row yields d_0; module k >= 1 drafts d_k in one
// call that also holds its own catch-up — one call per module for every
// sequence of the propose() call, the module's weights read once.
//
// Trees (mtp_source.cc, shapes in policy/tree_shape.h): module 0 gives the
// root's children; module k (k >= 1) runs, in ONE call with tree rows, one
// row per node on the path to each depth-k node it expands (the module-row
// contract's non-final rows, per branch: node x at position N-2-k+depth(x),
// embedding its token, reading module k-1's row of its parent), and its
// logits at the expanded nodes give their children: the w best by logit
// (T = 0) or by the coupled perturbed score (T > 0, Sampler::top; the first
// is exactly the chain's draft). The same call first holds module k's
// catch-up (its final rows not yet cached, as ordinary rows), so each
// module's weights are read once per cycle, as for chains. Tree rows never
// enter a module's positions: final rows come only from committed tokens, so
// live ≡ teacher-forced holds on the accepted path. A tree is drafted per
// sequence (its calls are not shared with other sequences).
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "drafter/drafter.h"
#include "speculative/sources/draft_source.h"
#include "speculative/sources/mtp_chains.h"

namespace mtp::speculative {

class MtpSource final : public DraftSource {
 public:
  // modules: how many modules (from 0) are kept up to date and drafted with
  // (0 = all K): a K = 4 drafter used with draft length 1 runs one module.
  MtpSource(const model::Model& target, const drafter::Drafter& d, int slots, int ctx,
            int modules = 0);

  const char* name() const override { return kMtpSource; }
  Capture capture() const override { return Capture::PreNormHidden; }
  Pricing pricing() const override { return Pricing::Priced; }
  int max_len() const override { return modules_; }
  bool trees() const override { return true; }

  void propose(std::span<ProposeJob> jobs) override;
  // Every module in use catches up on the prompt (timed as prompt processing).
  void prefill(std::span<ProposeJob> jobs) override;
  void release(int slot) override { chains_.release(slot); }
  Cost measure_cost(ThreadPool* pool) override;
  int catch_up_rows_per_token() const override { return modules_; }

  const MtpChains& chains() const { return chains_; }
  const drafter::Drafter& drafter() const { return chains_.runner().drafter(); }

 private:
  MtpChains::Job chain_job(ProposeJob& j, std::vector<MtpDraft>* history);
  void propose_tree(ProposeJob& j);
  // Children of `parent` (-1 = root) from a logits row for position pos: the
  // w best, pushed onto the tree; cum: the parent's cumulative probability.
  void add_children(ProposeJob& j, const float* lg, int64_t pos, int parent, int k, size_t w,
                    double cum);
  void run_module(ProposeJob& j, int k);
  void catch_up(ProposeJob& j, int modules);

  MtpChains chains_;
  int modules_;
  size_t d_;
  std::vector<MtpDraft> history_;
  // Tree scratch (one tree at a time).
  std::vector<double> cum_;                   // [node] cumulative draft probability
  std::vector<std::vector<int>> row_of_;      // [k][node]: module k's tree row of node (-1)
  std::vector<std::vector<float>> tree_out_;  // [k][rows · d]: module k's tree rows' h_k
  std::vector<Sampler::Candidate> cand_;
  std::vector<model::Row> rows_;
  std::vector<float> h_in_, h_out_, logits_;
  std::vector<uint8_t> mask_;
};

}  // namespace mtp::speculative
