// The MTP modules' state for one or many sequences, and their chain drafting
// with ONE call per module for all of them.
//
// Each sequence (a slot) has, per module k, its rows in module k's KV cache
// and their outputs h_k (docs/SEMANTICS.md: "A row is final once all its
// inputs are committed"). With N committed tokens module k's final rows are
// t ≤ N-2-k (drafter/module_rows.h); they are computed once, from the target's
// true capture hidden and true tokens, k ascending: module 0 whenever the
// sequence drafts (its last final row, N-2, yields d_0), module k ≥ 1 in the
// same call as its drafting rows (one read of its weights per cycle), or,
// while it does not draft, later. While drafting, module k (k ≥ 1) computes
// its k non-final rows N-1-k .. N-2 from the drafts d_0..d_{k-1}; row N-2
// yields d_k. Those rows are rolled back from the module's KV right after, so
// the next catch-up recomputes them from the committed tokens — the drafter
// never keeps state built from a rejected draft.
//
// Several sequences (Jobs) share every module call: rows of all of them in
// one MtpRunner::forward, each at its own slot's positions. A row's output is
// a function of its own sequence's rows only (batch-invariant kernels, per
// sequence attention), so each sequence's drafts are bitwise those it drafts
// alone — while the module's weights are read once per step instead of once
// per sequence (the scheduler, scheduler.h).
#pragma once
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "drafter/mtp_runner.h"
#include "speculative/cycle/draft_tree.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/target_session.h"

namespace mtp::speculative {

// A live draft: module k's token for the sequence of n_committed tokens and
// its logits row's maximum (the live ≡ teacher-forced check, bitwise).
struct MtpDraft {
  int n_committed;
  int k;
  int32_t token;
  float max_logit;
};

// A drafter's draft from its logits row for the token at sequence position
// pos: n columns, column i for token ids[i] (ids null: token i; ascending —
// a draft vocabulary, the assistant's centroid head; every other token's
// logit -inf): the argmax at temperature 0 (ties to the lower id); coupled:
// the keyed Gumbel-max the target uses (sampler.h) over the drafter's own
// distribution, keyed by the token id; rejection: a sample of the drafter's
// distribution q, pushed onto tree.dist for the verifier. max_logit: the
// row's largest logit (the live ≡ teacher-forced check, bitwise).
int32_t choose_draft(Sampler& sampler, SpecSampling mode, const float* logits, size_t n,
                     const int32_t* ids, int64_t pos, DraftTree& tree, float& max_logit);

// Top probability of a logits row (softmax max), for --draft-p-min.
float top_probability(const float* logits, size_t vocab);

// A budget tree's beam: the nodes of a depth expanded, and the children
// each gets (EAGLE-2's top-k): ceil(sqrt(budget)) within 1..8.
int budget_beam(int budget);

// The nodes of one tree depth to expand: nodes [begin, end) in order, or
// with beam > 0 (a budget tree) the beam of them with the largest cum (ties
// to the earlier), in node order.
void level_to_expand(std::vector<int>& expand, size_t begin, size_t end, int beam,
                     const std::vector<double>& cum);

// A budget tree (TreeOptions::Kind::Budget) cut to its `budget` most
// probable nodes by cum[node] (the product of the draft probabilities on
// its path), ties to the shallower (depth[node]), then earlier node. A
// child's cum never exceeds its parent's, so every kept node's parent is
// kept. scores (optional: one per node) follow the kept nodes. No-op when
// the tree has at most `budget` nodes.
void keep_most_probable(DraftTree& tree, std::vector<float>* scores,
                        const std::vector<double>& cum, const std::vector<int>& depth,
                        int budget);

class MtpChains {
 public:
  // Module caches for n_slots sequences of up to ctx positions each.
  MtpChains(const model::Model& m, const drafter::Drafter& d, int n_slots, int ctx);

  // One sequence's part of a batched call. Every job of one call names a
  // different slot.
  struct Job {
    int slot = 0;
    std::span<const int32_t> committed;     // the sequence's committed tokens
    const TargetSession* target = nullptr;  // their capture hidden (positions < N-1)
    ThreadPool* pool = nullptr;             // (the first job's is used for the call)
    int modules = 0;                        // modules in use: [0, modules) (0 = all K)
    // draft(): the longest chain (clipped to `modules`), --draft-p-min, how
    // each module chooses (choose_draft) and where the chain goes.
    int max_k = 0;
    float p_min = 0;
    Sampler* sampler = nullptr;
    SpecSampling mode = SpecSampling::Coupled;
    DraftTree* tree = nullptr;
    std::vector<MtpDraft>* history = nullptr;  // live drafts appended (optional)
    // This job's share of every call's seconds (by its rows), added to
    // (*module_seconds)[k] (optional, [K]).
    std::vector<double>* module_seconds = nullptr;
    double seconds = 0;  // out: its share of this draft()/catch_up(), summed
  };

  // Brings modules [0, min(modules, job.modules)) of every job's slot up to
  // date with its committed tokens: the final rows not yet in the caches, in
  // one call per module (chunks of at most q_max rows per sequence).
  void catch_up(std::span<Job> jobs, int modules = 1 << 30);
  // Chains: module 0 catches up (its last final row yields d_0), then for
  // k = 1, 2, ... one call of module k for every job still drafting at depth k
  // (its catch-up and its k non-final rows). A job stops at max_k, at its
  // modules, or where its module's top probability is below p_min.
  void draft(std::span<Job> jobs);
  // Slot s's sequence has ended: its module caches are emptied.
  void release(int slot);
  int K() const { return runner_.K(); }
  drafter::MtpRunner& runner() { return runner_; }
  const drafter::MtpRunner& runner() const { return runner_; }
  // h_k of slot s's rows, [ctx, d] (a chain's non-final rows past the final
  // ones are scratch there).
  float* out(int slot, int k) { return out_[size_t(slot)][size_t(k)].data(); }
  // Module 0's logits at row d0_row(slot) (-1: none kept).
  const float* d0_logits(int slot) const { return d0_logits_[size_t(slot)].data(); }
  int d0_row(int slot) const { return d0_row_[size_t(slot)]; }
  // Called after every module call with (module, rows, seconds) — e.g. the
  // tree chooser's module cost.
  std::function<void(int, int, double)> on_call;

 private:
  // One sequence's rows [t0, t1) of a module call.
  struct Piece {
    size_t job;
    int t0, t1;
    bool logits;  // keep the logits of its last row
  };
  // Runs module k over the pieces' rows — in calls of at most q_max rows per
  // sequence — writing h_k to out(slot, k) and the kept logits rows to
  // logits_[piece]; token_at(job, j) is the job's token j.
  template <class TokAt>
  void run(int k, std::span<Job> jobs, std::vector<Piece>& pieces, TokAt&& token_at);

  drafter::MtpRunner runner_;
  size_t d_;
  std::vector<std::vector<std::vector<float>>> out_;  // [slot][k][ctx · d]
  std::vector<std::vector<float>> d0_logits_;         // [slot][V]
  std::vector<int> d0_row_;                           // [slot]
  // Scratch.
  std::vector<std::vector<int32_t>> drafts_;  // [job]
  std::vector<std::vector<float>> piece_logits_;  // [piece][V]
  std::vector<model::Row> rows_;
  std::vector<float> h_in_, h_out_, logits_;
  std::vector<uint8_t> mask_;
};

}  // namespace mtp::speculative
