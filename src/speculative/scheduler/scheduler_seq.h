// The scheduler's per-sequence state, internal to the scheduler's sources:
// scheduler.cc (admission, the one forward per step, accept and finish) and
// scheduler_plan.cc (each sequence's option, draft lengths, the batched
// drafter call) share it. Not part of the public interface (scheduler.h).
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "speculative/cycle/target_session.h"
#include "speculative/scheduler/params.h"
#include "speculative/scheduler/scheduler.h"

namespace mtp::speculative::scheduler_detail {

using Clock = std::chrono::steady_clock;
inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The longest free draft a step verifies (a longer max_draft is clipped):
// the KV cache's rows of one sequence per forward.
constexpr int kMaxFreeDraft = 64;

// Depth-0 counters of a sequence's stats for `source` (the budget's pooled prior).
inline std::pair<long, long> depth0(const SpecStats& st, const char* source) {
  const auto it = st.sources.find(source);
  if (it == st.sources.end() || it->second.drafted.empty()) return {0, 0};
  return {it->second.drafted[0], it->second.accepted[0]};
}

// A sequence that does not speculate: never asked to propose.
class NoProposer : public Proposer {
 public:
  void propose(std::span<const int32_t>, int, DraftTree& tree) override { tree.clear(); }
  void commit(std::span<const int32_t>) override {}
};

// The drafts of one sequence, prepared by the engine's plan (a free source's
// proposal, or the priced source's batched drafts) before the sequence's
// cycle asks for them.
class PreparedProposer : public Proposer {
 public:
  void propose(std::span<const int32_t>, int max_k, DraftTree& tree) override {
    MTP_CHECK(prepared_.max_depth() <= max_k, "prepared drafts of depth {} for a limit of {}",
              prepared_.max_depth(), max_k);
    std::swap(tree, prepared_);
    prepared_.clear();
  }
  void commit(std::span<const int32_t>) override {}
  bool counts_sources() const override { return true; }  // scheduler_plan.cc counts them
  DraftTree& prepared() { return prepared_; }

 private:
  DraftTree prepared_;
};

}  // namespace mtp::speculative::scheduler_detail

namespace mtp::speculative {

struct Scheduler::Seq {
  uint64_t id;
  Request req;
  TargetSession target;
  TargetVerifier verifier;
  Sampler sampler;
  scheduler_detail::PreparedProposer prepared;
  scheduler_detail::NoProposer none;
  Sampler draft_sampler;          // a model source's choices (its own draw counter)
  std::vector<double> depth_s;    // [depth] the priced source's seconds for this sequence
  SeqProposals free;              // this step's free proposals, judged as the text grows
  int chosen = -1;  // this step: the free proposal verified (-1: the priced source's drafts or none)
  int priced_idle = 0;            // steps since the priced source last drafted for it
  int free_idle = 0;              // steps with a free proposal but no draft verified
  bool probe = false;             // this step's draft is a probe (plan_drafts)
  std::vector<int32_t> committed;
  // Text the sink streamed, by the index of the token it became final with
  // (closing: held-back text flushed at the end).
  std::vector<std::pair<size_t, std::string>> texts;
  std::string tail;
  bool closing = false;
  TokenSink sink;
  SpecStats stats;
  AcceptCounters counters;  // the priced source's (forgetting) acceptance counters
  std::optional<SpecSequence> spec;  // from the first generated token on
  std::vector<CycleTrace> trace;     // this cycle's record (and all of them: record_trace)
  std::vector<float> scores;         // this step's proposal's per-node scores (the trace)
  int draft_k = 0;                   // the priced source's longest draft (0: none)
  int free_k = 0;                    // the free sources' longest (0: none)
  int spec_k = 0;                    // max of both (0: plain decoding)
  int prefilled = 0;                 // prompt positions forwarded
  // Committed length at the priced source's last propose: it catches up on
  // the tokens since, lazily, in its next propose.
  int drafter_at = 0;
  // The catch-up seconds the budget charged this step's first draft
  // (first_draft_seconds, before the live ratio).
  double charged_s = 0;
  std::vector<int> widths;  // this step's tree shape (trees; auto's choice)
  scheduler_detail::Clock::time_point admitted;
  double queue_s = 0, prompt_s = 0;
  // This step: rows [row0, row0 + nrows) of the forward.
  size_t row0 = 0;
  int nrows = 0;
  const DraftTree* tree = nullptr;
  std::vector<int32_t> choices;

  Seq(uint64_t id_, Request r, const model::Model& m, model::KVCache& kv, int slot,
      const io::Tokenizer* tok, ThreadPool* pool)
      : id(id_), req(std::move(r)), target(m, kv, slot, pool),
        verifier(target, req.sampler, req.mode), sampler(req.sampler),
        draft_sampler(req.sampler), committed(req.prompt),
        sink(tok, stop_token_ids(m.config(), tok), req.n_new, req.stop,
             [this](std::string_view t) {
               if (req.on_text) req.on_text(t);
               if (closing) tail.append(t);
               else texts.push_back({sink.tokens().size() - 1, std::string(t)});
             },
             req.prompt.back()) {
    if (req.on_token) sink.set_token_callback(req.on_token);
  }

  bool prefilling() const { return prefilled < int(req.prompt.size()); }
};

}  // namespace mtp::speculative
