// The draft source "native-mtp": the target checkpoint's own
// multi-token-prediction head (Qwen3.5's mtp.*, drafter/native_head.h), for
// every slot of the engine, applied as vLLM's MTP proposer applies it.
// Capture: the target's hidden AFTER its final norm (Capture::PostNormHidden:
// TargetSession::post_norm_hidden, the bits the target's lm_head reads).
//
// With N committed tokens (the target has forwarded positions 0 .. N-2):
// - catch-up: the head's final rows p = 0 .. N-2 (token x_{p+1}, the target's
//   post-norm h_p, position p) not yet in its cache, for every job in one call;
//   the logits of row N-2 give d_0, the token at position N;
// - draft i >= 1: one row at position N-2+i embedding d_{i-1} and reading the
//   head's own output of the row before; its logits give d_i (position N+i).
//   One call per depth for every job still drafting;
// - the draft rows are rolled back at once (a head's cache holds only rows of
//   committed text: live drafts equal the teacher-forced head's).
// Chains only (trees() false); the choice of a token is choose_draft's
// (greedy, coupled, or rejection sampling's q).
#pragma once
#include <span>
#include <vector>

#include "drafter/native_head.h"
#include "speculative/sources/draft_source.h"

namespace mtp::speculative {

class NativeMtpSource final : public DraftSource {
 public:
  // max_len: the longest chain drafted (0: kDefaultLen).
  NativeMtpSource(const model::Model& target, int slots, int ctx, int max_len = 0);
  static constexpr int kDefaultLen = 3;
  static constexpr int kMaxLen = 16;

  const char* name() const override { return kNativeMtpSource; }
  Capture capture() const override { return Capture::PostNormHidden; }
  Pricing pricing() const override { return Pricing::Priced; }
  int max_len() const override { return max_len_; }

  void propose(std::span<ProposeJob> jobs) override;
  void prefill(std::span<ProposeJob> jobs) override;
  void release(int slot) override { head_.kv().truncate(slot, 0); }
  Cost measure_cost(ThreadPool* pool) override;
  int catch_up_rows_per_token() const override { return 1; }

  const drafter::NativeHead& head() const { return head_; }

 private:
  // Brings every job's final rows up to N-2; with `logits`, keeps the row
  // N-2's logits and output per job (last_logits_, last_out_).
  void catch_up(std::span<ProposeJob> jobs, bool logits);
  // One head call over rows_/h_in_, its seconds shared out over the jobs by
  // rows (job_of_: each row's job) and reported at depth `depth`.
  void run(std::span<ProposeJob> jobs, int depth, bool logits, ThreadPool* pool);

  drafter::NativeHead head_;
  int max_len_;
  size_t d_, V_;
  std::vector<model::Row> rows_;
  std::vector<size_t> job_of_;
  std::vector<float> h_in_, h_out_, logits_;
  std::vector<uint8_t> mask_;
  std::vector<std::vector<float>> last_logits_, last_out_;  // [job][V], [job][d]
};

}  // namespace mtp::speculative
