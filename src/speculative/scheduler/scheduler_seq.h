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
#include "speculative/scheduler/scheduler.h"
#include "speculative/cycle/target_session.h"

namespace mtp::speculative::scheduler_detail {

using Clock = std::chrono::steady_clock;
inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The longest lookup draft a step verifies (--lookup-max-draft beyond it is
// clipped): the KV cache's rows of one sequence per forward.
constexpr int kMaxLookupDraft = 64;

// MTP depth-0 counters of a sequence's stats (the budget's pooled prior).
inline std::pair<long, long> mtp_depth0(const SpecStats& st) {
  const auto it = st.sources.find(DraftSource::kind_name(DraftSource::Kind::Mtp));
  if (it == st.sources.end() || it->second.drafted.empty()) return {0, 0};
  return {it->second.drafted[0], it->second.accepted[0]};
}

// A sequence without a drafter: never asked to propose (its draft length is 0).
class NoProposer : public Proposer {
 public:
  void propose(std::span<const int32_t>, int, DraftTree& tree) override { tree.clear(); }
  void commit(std::span<const int32_t>) override {}
};

// The drafts of one sequence, prepared by the scheduler's batched drafter
// (MtpChains::draft, one call per module for every sequence) before the
// sequence's cycle asks for them.
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
  scheduler_detail::PreparedProposer prepared;  // with a drafter
  Sampler draft_sampler;      // the drafter's choices (its own draw counter)
  std::vector<double> module_s;  // [K] this sequence's share of module seconds
  std::optional<SeqLookups> lookups;  // with lookup sources
  int chosen = -1;  // this step: the lookup proposal verified instead of the drafter's chain
  int mtp_idle = 0;  // steps since the drafter last drafted for it
  scheduler_detail::NoProposer none;
  std::vector<int32_t> committed;
  // Text the sink streamed, by the index of the token it became final with
  // (closing: held-back text flushed at the end).
  std::vector<std::pair<size_t, std::string>> texts;
  std::string tail;
  bool closing = false;
  TokenSink sink;
  SpecStats stats;
  AcceptCounters counters;  // the budget's (forgetting) acceptance counters
  std::optional<SpecSequence> spec;  // from the first generated token on
  int draft_k = 0;                   // longest MTP draft (0: no drafter)
  int lookup_k = 0;                  // longest lookup draft (0: no lookups)
  int spec_k = 0;                    // max of both (0: plain decoding)
  int prefilled = 0;                 // prompt positions forwarded
  // Committed length at the last propose: the drafter's modules still have to
  // catch up on the tokens since (lazily, in the next propose).
  int drafter_at = 0;
  // The catch-up seconds the budget charged this step's first draft
  // (first_draft_seconds, before the live ratio).
  double charged_s = 0;
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
        verifier(target, req.gen.sampler, req.mode), sampler(req.gen.sampler),
        draft_sampler(req.gen.sampler), committed(req.prompt),
        sink(tok, stop_token_ids(m.config(), tok), req.gen.n_new, req.gen.stop,
             [this](std::string_view t) {
               if (closing) tail.append(t);
               else texts.push_back({sink.tokens().size() - 1, std::string(t)});
             },
             req.prompt.back()) {}

  bool prefilling() const { return prefilled < int(req.prompt.size()); }
};

}  // namespace mtp::speculative
