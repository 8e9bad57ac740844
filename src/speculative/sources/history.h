// The history source (SuffixDecoding-style): a datastore of earlier outputs of
// this process (and a user corpus, --lookup-corpus) that proposes the most
// frequent continuation of the committed text.
//
// Structure: for every context of n = 1..ngram_max tokens that occurs in a
// stored document followed by a token t, count[context][t] = how often. A
// proposal extends the committed text greedily: the longest suffix (n =
// ngram_max .. 1, of the committed text and the drafts so far) that has counts
// gives the next draft, its most frequent continuation (ties: the smallest
// token id); drafting stops at the first suffix without counts. Adding a
// document of L tokens costs O(L · ngram_max); a proposal ngram_max lookups
// per draft. (A 64-bit hash collision would merge two contexts' counts: it
// can only cost acceptance, never change the output.)
//
// Bound (--history-mb): memory_bytes() — a conservative account of the tokens,
// table keys and counts held (an upper bound of the allocations: see
// kKeyBytes/kCountBytes) — never exceeds budget_bytes(): adding a document
// evicts the oldest documents first (their counts are taken back out, so the
// store then equals one built from the documents kept); a document larger than
// the whole budget keeps only its most recent tokens.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "speculative/sources/lookup.h"

namespace mtp::speculative {

class HistoryStore {
 public:
  // budget_bytes: --history-mb × 2^20 (> 0).
  HistoryStore(int ngram_max, size_t budget_bytes);

  void add(std::span<const int32_t> doc);
  // A finished request as one document, prompt then output (nothing when it
  // generated nothing): how the servers' and the scheduler's history learns.
  void add_request(std::span<const int32_t> prompt, std::span<const int32_t> output);
  // Up to max_k drafts continuing `context` (out is cleared first). Returns
  // the length n of the suffix whose counts gave the first draft (0: none).
  int propose(std::span<const int32_t> context, int max_k, std::vector<int32_t>& out) const;

  size_t memory_bytes() const;
  size_t budget_bytes() const { return budget_; }
  size_t documents() const { return docs_.size(); }
  const std::deque<std::vector<int32_t>>& docs() const { return docs_; }
  int ngram_max() const { return ngram_max_; }

  // Accounting constants (bytes): a hash-table key with its node, bucket and
  // count vector header and allocator overhead; one (token, count) pair with
  // the vector's growth slack; one stored token; one document's overhead.
  static constexpr size_t kKeyBytes = 128, kCountBytes = 16, kTokenBytes = 4, kDocBytes = 64;

 private:
  struct Count {
    int32_t token;
    int32_t n;
  };
  void apply(std::span<const int32_t> doc, int delta);
  // The most frequent continuation of ctx's longest suffix with counts (-1:
  // none); *n = that suffix's length.
  int32_t best_next(std::span<const int32_t> ctx, int* n) const;

  int ngram_max_;
  size_t budget_;
  std::deque<std::vector<int32_t>> docs_;
  std::unordered_map<uint64_t, std::vector<Count>> table_;
  size_t n_tokens_ = 0, n_counts_ = 0;
};

// The brute-force definition of HistoryStore::propose over `docs` (tests);
// *first_n (if given) = what propose returns.
std::vector<int32_t> history_reference(const std::deque<std::vector<int32_t>>& docs,
                                       int ngram_max, std::span<const int32_t> context, int max_k,
                                       int* first_n = nullptr);

}  // namespace mtp::speculative
