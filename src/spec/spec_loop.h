// The speculative decoding cycle, independent of what drafts and what verifies
// (llama.cpp-style lifecycle with per-position counters). The MTP engine, the
// drift harness's oracle and the tests' scripted targets/drafters all plug in
// here, so the accept/emit logic exists once and is tested in isolation.
//
// One cycle, with committed tokens tok[0..N-1] (the target has forwarded
// 0..N-2; tok[N-1] is "next"):
//   1. proposer.propose: up to k_max drafts d_0..d_{k-1} continuing tok.
//   2. verifier.verify: the target forwards [next, d_0 .. d_{k-1}] in ONE call
//      and returns its own choice after each prefix: c_0 .. c_k.
//   3. accept the longest prefix with d_i == c_i (a drafts); emit d_0..d_{a-1}
//      then c_a (the correction, or the bonus token when a == k) — each through
//      the sink, which may end generation at any of them (never one too many).
//   4. verifier.commit / proposer.commit with the new committed sequence
//      (N + a + 1 tokens): the target drops the rejected positions, the proposer
//      catches up on the newly final rows.
// Drafts are clipped so the committed sequence never exceeds ctx.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "spec/token_sink.h"

namespace mtp::spec {

class Verifier {
 public:
  virtual ~Verifier() = default;
  // choices[i] = the target's token after committed + drafts[0..i-1], for
  // i = 0..drafts.size(). Forwards next and all drafts in one call.
  virtual void verify(std::span<const int32_t> committed, std::span<const int32_t> drafts,
                      std::vector<int32_t>& choices) = 0;
  // The committed sequence is now `committed` (its last token not yet forwarded);
  // n_accepted of the verified drafts were kept.
  virtual void commit(std::span<const int32_t> committed, int n_accepted) = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Up to max_k drafts continuing `committed` (fewer, or none, is fine).
  virtual void propose(std::span<const int32_t> committed, int max_k,
                       std::vector<int32_t>& drafts) = 0;
  // The committed sequence after a cycle's verify.
  virtual void commit(std::span<const int32_t> committed) = 0;
};

struct SpecStats {
  long cycles = 0;
  std::vector<long> drafted;   // [k]: drafts at position k that were verified ("reached")
  std::vector<long> accepted;  // [k]: of those, accepted
  long emitted = 0;            // tokens emitted by cycles
  double time_draft_s = 0, time_verify_s = 0, time_other_s = 0;
  std::vector<double> time_module_s;  // [k]: drafter module k's forwards (when known)

  std::vector<double> acceptance() const;  // accepted[k] / drafted[k]
  double tokens_per_cycle() const;         // emitted / cycles
  nlohmann::json to_json() const;
};

// One cycle's record, for the live ≡ teacher-forced check and debugging.
struct CycleTrace {
  int n_committed = 0;            // N at the start of the cycle
  std::vector<int32_t> drafts;    // d_0 .. d_{k-1}
  int accepted = 0;               // a
};

// Runs cycles until the sink is done or the context is full. `committed`
// is updated in place. max_k >= 1.
void speculative_loop(Verifier& verifier, Proposer& proposer, std::vector<int32_t>& committed,
                      TokenSink& sink, int max_k, int ctx, SpecStats& stats,
                      std::vector<CycleTrace>* trace = nullptr);

}  // namespace mtp::spec
