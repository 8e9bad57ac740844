#include "speculative/sources/lookup.h"

#include <algorithm>

#include "core/error.h"
#include "core/setting.h"

namespace mtp::speculative {

void LookupOptions::validate() const {
  if (ngram_max < 1 || ngram_max > 64) {
    fail_setting<InputError>("lookup_ngram_max",
                             "the lookups' longest suffix must be in 1..64 tokens, got {}",
                             ngram_max);
  }
  if (max_draft < 1 || max_draft > 256) {
    fail_setting<InputError>("lookup_max_draft",
                             "the lookups' longest draft must be in 1..256 tokens, got {}",
                             max_draft);
  }
}

uint64_t ngram_hash(const int32_t* t, int n) {
  uint64_t h = 1469598103934665603ull ^ uint64_t(n);
  for (int i = 0; i < n; ++i) h = (h ^ uint32_t(t[i])) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

PromptLookup::PromptLookup(const LookupOptions& o) : o_(o) {
  o_.validate();
  last_end_.resize(size_t(o_.ngram_max));
}

void PromptLookup::add_token(int32_t t) {
  tokens_.push_back(t);
  // The n-grams ending at the previous position now have a continuation.
  const int e = int(tokens_.size()) - 2;
  if (e < 0) return;
  for (int n = 1; n <= o_.ngram_max && e - n + 1 >= 0; ++n) {
    last_end_[size_t(n - 1)][ngram_hash(tokens_.data() + e - n + 1, n)] = e;
  }
}

void PromptLookup::sync(std::span<const int32_t> committed) {
  if (committed.size() < tokens_.size()) {  // another sequence: start over
    tokens_.clear();
    for (auto& m : last_end_) m.clear();
  }
  for (size_t i = tokens_.size(); i < committed.size(); ++i) add_token(committed[i]);
}

void PromptLookup::propose(std::span<const int32_t> committed, int max_k,
                           std::vector<int32_t>& out) {
  out.clear();
  last_class_ = 0;
  sync(committed);
  const int N = int(tokens_.size());
  const int limit = std::min(max_k, o_.max_draft);
  if (limit < 1 || N < 2) return;
  for (int n = std::min(o_.ngram_max, N - 1); n >= 1; --n) {
    const int32_t* suffix = tokens_.data() + N - n;
    const auto& table = last_end_[size_t(n - 1)];
    auto it = table.find(ngram_hash(suffix, n));
    if (it == table.end()) continue;
    const int e = it->second;
    if (!std::equal(suffix, suffix + n, tokens_.data() + e - n + 1)) continue;  // collision
    const int end = std::min(N, e + 1 + limit);
    out.assign(tokens_.begin() + e + 1, tokens_.begin() + end);
    last_class_ = n - 1;
    return;
  }
}

std::vector<int32_t> prompt_lookup_reference(std::span<const int32_t> c, const LookupOptions& o,
                                             int max_k, int* matched) {
  if (matched) *matched = 0;
  const int N = int(c.size());
  const int limit = std::min(max_k, o.max_draft);
  if (limit < 1 || N < 2) return {};
  for (int n = std::min(o.ngram_max, N - 1); n >= 1; --n) {
    for (int e = N - 2; e - n + 1 >= 0; --e) {
      bool match = true;
      for (int i = 0; i < n && match; ++i) match = c[size_t(e - i)] == c[size_t(N - 1 - i)];
      if (!match) continue;
      const int end = std::min(N, e + 1 + limit);
      if (matched) *matched = n;
      return {c.begin() + e + 1, c.begin() + end};
    }
  }
  return {};
}

void ProposalJudge::add(int arm, size_t n0, int from, std::span<const int32_t> drafts) {
  if (from < 0 || size_t(from) >= drafts.size()) return;  // nothing left to judge
  pending_.push_back({arm, from, n0, std::vector<int32_t>(drafts.begin(), drafts.end())});
}

ProposalJudge::Verdict ProposalJudge::step(const Pending& p, std::span<const int32_t> committed) {
  Verdict v{p.arm, int(p.drafts.size()), p.from, p.from, 0};
  v.known = committed.size() > p.n0 ? int(std::min(committed.size() - p.n0, p.drafts.size() + 1)) : 0;
  const int end = std::min(v.known, v.len);
  while (v.matched < end && p.drafts[size_t(v.matched)] == committed[p.n0 + size_t(v.matched)]) {
    ++v.matched;
  }
  return v;
}

}  // namespace mtp::speculative
