// Choosing a drafter's draft vocabulary (DrafterConfig::draft_vocab): the n
// tokens the target emits most often in the training shards.
//
// Why: a module's cost is its block plus the target's lm_head, and for a small
// target the head is the larger part ([vocab, d] per draft). The tokens a
// greedy target actually produces are concentrated (FR-Spec, Zhao et al. 2025):
// drafting only among the most frequent ones reads a fraction of the head and
// loses only the drafts whose token lies outside. Output is unaffected either
// way — the target verifies every draft with its full head.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mtp::drafter {

struct DraftVocab {
  std::vector<int32_t> ids;  // sorted ascending, unique
  long labels = 0;           // training labels counted
  long covered = 0;          // of them, labels whose token is in ids
  long distinct = 0;         // distinct tokens among the labels
  double coverage() const { return labels ? double(covered) / double(labels) : 0.0; }
};

// Counts the labels (tokens with loss_mask 1) of the training split of the
// shards folder `dir` and keeps the n most frequent tokens (ties: lower id),
// fewer when fewer distinct tokens occur. Throws InputError for n < 1, and
// FormatError for ids outside [0, vocab).
DraftVocab choose_draft_vocab(const std::string& dir, int vocab, int n);

// The same over explicit label counts (counts[v] = occurrences of token v).
DraftVocab top_tokens(const std::vector<long>& counts, int n);

}  // namespace mtp::drafter
