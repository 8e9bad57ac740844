// The draft source "gemma4-assistant": Gemma 4's MTP assistant
// (drafter/gemma4_assistant.h), for every slot of the engine. Capture: the
// target's post-norm hidden of the position before the last committed token
// and the K/V of the target's last K/V-owning layer of each kind, read in
// place from the engine's cache (the assistant writes none).
//
// Chains: step 1 of every job's chain in ONE assistant call (one row per
// sequence), then step j for the jobs still drafting — the assistant's
// weights read once per step for all sequences. The state carried from step
// to step is the assistant's own projected state; nothing carries from one
// cycle to the next, so the drafts are a function of the committed text and
// the target's capture alone (live ≡ teacher-forced,
// drafter::assistant_teacher_forced). docs/SEMANTICS.md "Gemma 4's
// assistant" gives every step's inputs.
//
// Trees (a job's Static or Budget shape): depth d's nodes are expanded in
// one assistant call, one row per expanded node; a node's row takes its
// token and the state' of the row that drafted it (its parent's expansion:
// each branch carries its own state), at the same position N - 1 and keys
// [.., N - 2] as every chain step — the target's committed K/V only, no
// draft has any. Children are the row's best candidates (Sampler::top);
// Budget expands the beam most probable nodes of each depth and keeps the
// budget's most probable nodes (keep_most_probable), as the MTP source does.
// A node's tokens and scores are those of the replay fed its path.
#pragma once
#include <span>
#include <vector>

#include "drafter/assistant_runner.h"
#include "speculative/cycle/sampler.h"
#include "speculative/sources/draft_source.h"

namespace mtp::speculative {

class AssistantSource final : public DraftSource {
 public:
  // max_len: draft steps per cycle at most (>= 1).
  AssistantSource(const model::Model& target, const drafter::Gemma4Assistant& a, int max_len);

  const char* name() const override { return kAssistantSource; }
  Capture capture() const override { return Capture::SharedKV; }
  Pricing pricing() const override { return Pricing::Priced; }
  int max_len() const override { return max_len_; }
  bool trees() const override { return true; }

  void propose(std::span<ProposeJob> jobs) override;
  // Seconds of one step of a few rows and of each further row, over a
  // scratch cache of the target (64 positions of keys).
  Cost measure_cost(ThreadPool* pool) override;

  const drafter::AssistantRunner& runner() const { return runner_; }

 private:
  // The jobs in `jobs` whose target cache is `kv`, drafted together.
  void propose_group(std::span<ProposeJob* const> jobs, const model::KVCache& kv);
  // Job j's tree (j.tree a Static or Budget shape) into j.out.
  void propose_tree(ProposeJob& j, const model::KVCache& kv);
  // One step for in_ (timed into j), its state' into next_.
  void run_step(ProposeJob& j, int k, const model::KVCache& kv);

  drafter::AssistantRunner runner_;
  int max_len_;
  std::vector<drafter::AssistantInput> in_;
  std::vector<float> state_, next_;
  std::vector<float> node_state_;              // [node, backbone]: state' of its drafting row
  std::vector<double> cum_;                    // [node] cumulative draft probability
  std::vector<Sampler::Candidate> cand_;
};

// The default draft length of the assistant when none is asked for.
inline constexpr int kAssistantDefaultSteps = 4;

}  // namespace mtp::speculative
