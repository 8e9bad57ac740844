// Draft sources that look the continuation up instead of computing it (the
// draft sources "prompt" and "history" wrap them: lookup_sources.cc).
//
// PromptLookup (prompt-lookup decoding): the longest suffix of the committed
// tokens, n = ngram_max .. 1 tokens, longest first, that occurred earlier in
// the committed sequence (prompt or generated text) proposes the up to
// max_draft tokens that followed its most recent earlier occurrence.
// "Earlier" = an occurrence ending at e <= N-2 (N committed tokens), so the
// continuation tok[e+1 ..] is never empty; it may run into the suffix itself.
// Update: O(ngram_max) per committed token — the n-grams ending at N-2 are
// entered into one hash table per n (n-gram hash -> its last end position)
// when token N-1 arrives; a proposal is ngram_max lookups. No rescans.
// A 64-bit hash collision is caught by comparing the n tokens (it then only
// loses that proposal; a source only proposes, the verifier decides).
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "speculative/cycle/draft_tree.h"

namespace mtp::speculative {

struct LookupOptions {
  int ngram_max = 4;  // --lookup-ngram-max: longest suffix tried (>= 1)
  int max_draft = 8;  // --lookup-max-draft: longest proposal (>= 1)
  void validate() const;  // InputError about the setting (core/setting.h)
};

// Hash of tokens[0..n) (FNV-1a over the 32-bit ids, then a 64-bit mix).
uint64_t ngram_hash(const int32_t* tokens, int n);

class PromptLookup {
 public:
  explicit PromptLookup(const LookupOptions& o = {});
  // Brings the tables up to `committed` (only the new tokens; a sequence
  // shorter than the one seen restarts from scratch), then looks up: up to
  // max_k tokens into `out` (cleared first; empty = no proposal).
  void propose(std::span<const int32_t> committed, int max_k, std::vector<int32_t>& out);
  // Evidence classes: the last proposal's matched suffix length n - 1.
  int classes() const { return o_.ngram_max; }
  int last_class() const { return last_class_; }
  // The tables' update alone (propose calls it).
  void sync(std::span<const int32_t> committed);
  size_t seen() const { return tokens_.size(); }

 private:
  void add_token(int32_t t);
  LookupOptions o_;
  int last_class_ = 0;  // matched n - 1 of the last proposal
  std::vector<int32_t> tokens_;
  std::vector<std::unordered_map<uint64_t, int32_t>> last_end_;  // [n-1]: hash -> end position
};

// Lookup proposals judged against the committed text as it grows — free
// evidence, since a lookup proposes without a forward. A proposal made when
// the text held n0 tokens is judged from position `from` on (the positions
// below it were judged already, all right): each position as the text
// reaches it, up to its first wrong draft or its end. Callers judge the
// drafts past the ones they verified this way too — otherwise a position an
// estimate stopped verifying kept the estimate of its last bad patch for
// good (the policy's arms, policy/source_arms.h). Each pending proposal ends within len - from
// committed tokens, so at most max_draft + 1 cycles' proposals wait.
class ProposalJudge {
 public:
  // What judge() learned of one proposal: positions [from, min(matched,
  // known, len)) right; position `matched` wrong when matched < min(known,
  // len); `known` tokens of the text after n0 exist (positions >= known are
  // unknown).
  struct Verdict {
    int arm, len, from, matched, known;
  };
  // arm: the caller's id for the proposal's estimate (source and class).
  void add(int arm, size_t n0, int from, std::span<const int32_t> drafts);
  // Judges every pending proposal as far as `committed` (the whole text; it
  // only grows) goes: on_verdict(v) per proposal with a position newly known.
  template <class F>
  void judge(std::span<const int32_t> committed, F&& on_verdict) {
    size_t kept = 0;
    for (size_t e = 0; e < pending_.size(); ++e) {
      Pending& p = pending_[e];
      Verdict v = step(p, committed);
      if (v.known > p.from) on_verdict(v);
      if (v.matched < std::min(v.known, v.len) || v.matched == v.len) continue;  // done
      p.from = v.matched;  // all of it known so far was right
      if (kept != e) pending_[kept] = std::move(p);
      ++kept;
    }
    pending_.resize(kept);
  }
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    int arm, from;
    size_t n0;
    std::vector<int32_t> drafts;
  };
  static Verdict step(const Pending& p, std::span<const int32_t> committed);
  std::vector<Pending> pending_;
};

// The brute-force definition PromptLookup implements (for tests): scans every
// earlier end position, longest n first, the most recent occurrence wins.
// *matched (if given) = that n (0: no proposal).
std::vector<int32_t> prompt_lookup_reference(std::span<const int32_t> committed,
                                             const LookupOptions& o, int max_k,
                                             int* matched = nullptr);

}  // namespace mtp::speculative
