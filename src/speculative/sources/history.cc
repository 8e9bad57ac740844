#include "speculative/sources/history.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/setting.h"

namespace mtp::speculative {

HistoryStore::HistoryStore(int ngram_max, size_t budget_bytes)
    : ngram_max_(ngram_max), budget_(budget_bytes) {
  if (ngram_max < 1 || ngram_max > 64) {
    fail_setting<InputError>("lookup_ngram_max",
                             "the history's longest suffix must be in 1..64 tokens, got {}",
                             ngram_max);
  }
  if (budget_bytes == 0) {
    fail_setting<InputError>("history_bytes", "the history's memory bound must be > 0 bytes");
  }
}

size_t HistoryStore::memory_bytes() const {
  return docs_.size() * kDocBytes + n_tokens_ * kTokenBytes + table_.size() * kKeyBytes +
         n_counts_ * kCountBytes;
}

void HistoryStore::apply(std::span<const int32_t> doc, int delta) {
  const int L = int(doc.size());
  for (int e = 0; e + 1 < L; ++e) {
    const int32_t next = doc[size_t(e + 1)];
    for (int n = 1; n <= ngram_max_ && e - n + 1 >= 0; ++n) {
      const uint64_t key = ngram_hash(doc.data() + e - n + 1, n);
      if (delta > 0) {
        std::vector<Count>& c = table_[key];
        auto it = std::find_if(c.begin(), c.end(), [&](const Count& x) { return x.token == next; });
        if (it != c.end()) {
          ++it->n;
        } else {
          c.push_back({next, 1});
          ++n_counts_;
        }
      } else {
        auto t = table_.find(key);
        MTP_CHECK(t != table_.end(), "history eviction: a context of the evicted document is missing");
        std::vector<Count>& c = t->second;
        auto it = std::find_if(c.begin(), c.end(), [&](const Count& x) { return x.token == next; });
        MTP_CHECK(it != c.end(), "history eviction: a count of the evicted document is missing");
        if (--it->n == 0) {
          c.erase(it);
          --n_counts_;
          if (c.empty()) table_.erase(t);
        }
      }
    }
  }
}

void HistoryStore::add_request(std::span<const int32_t> prompt,
                               std::span<const int32_t> output) {
  if (output.empty()) return;
  std::vector<int32_t> doc(prompt.begin(), prompt.end());
  doc.insert(doc.end(), output.begin(), output.end());
  add(doc);
}

void HistoryStore::add(std::span<const int32_t> doc) {
  // Worst case for one document alone: every token a new key and count at
  // every n, plus its tokens; keep only the tail that fits the budget.
  const size_t per_token = kTokenBytes + size_t(ngram_max_) * (kKeyBytes + kCountBytes);
  const size_t fits = budget_ > kDocBytes ? (budget_ - kDocBytes) / per_token : 0;
  if (doc.size() > fits) doc = doc.subspan(doc.size() - fits);
  if (doc.empty()) return;
  docs_.emplace_back(doc.begin(), doc.end());
  n_tokens_ += doc.size();
  apply(doc, +1);
  while (memory_bytes() > budget_ && docs_.size() > 1) {
    apply(docs_.front(), -1);
    n_tokens_ -= docs_.front().size();
    docs_.pop_front();
  }
  MTP_CHECK(memory_bytes() <= budget_, "history store holds {} bytes for a budget of {}",
            memory_bytes(), budget_);
}

int32_t HistoryStore::best_next(std::span<const int32_t> ctx, int* n_out) const {
  const int len = int(ctx.size());
  for (int n = std::min(ngram_max_, len); n >= 1; --n) {
    auto it = table_.find(ngram_hash(ctx.data() + len - n, n));
    if (it == table_.end() || it->second.empty()) continue;
    const Count* best = nullptr;
    for (const Count& c : it->second) {
      if (!best || c.n > best->n || (c.n == best->n && c.token < best->token)) best = &c;
    }
    *n_out = n;
    return best->token;
  }
  return -1;
}

int HistoryStore::propose(std::span<const int32_t> context, int max_k,
                          std::vector<int32_t>& out) const {
  out.clear();
  if (table_.empty() || max_k < 1 || context.empty()) return 0;
  // The last ngram_max tokens of context + drafts.
  const size_t keep = std::min(context.size(), size_t(ngram_max_));
  std::vector<int32_t> ctx(context.end() - long(keep), context.end());
  int first_n = 0;
  for (int k = 0; k < max_k; ++k) {
    int n = 0;
    const int32_t t = best_next(ctx, &n);
    if (t < 0) break;
    if (k == 0) first_n = n;
    out.push_back(t);
    ctx.push_back(t);
    if (ctx.size() > size_t(ngram_max_)) ctx.erase(ctx.begin());
  }
  return first_n;
}

std::vector<int32_t> history_reference(const std::deque<std::vector<int32_t>>& docs,
                                       int ngram_max, std::span<const int32_t> context,
                                       int max_k, int* first_n) {
  if (first_n) *first_n = 0;
  std::vector<int32_t> ctx(context.begin(), context.end()), out;
  for (int k = 0; k < max_k; ++k) {
    int32_t pick = -1;
    const int len = int(ctx.size());
    for (int n = std::min(ngram_max, len); n >= 1 && pick < 0; --n) {
      std::map<int32_t, long> count;
      for (const auto& d : docs) {
        for (int e = n - 1; e + 1 < int(d.size()); ++e) {
          bool match = true;
          for (int i = 0; i < n && match; ++i) match = d[size_t(e - i)] == ctx[size_t(len - 1 - i)];
          if (match) ++count[d[size_t(e + 1)]];
        }
      }
      long best = 0;
      for (const auto& [t, c] : count) {  // ascending ids: ties go to the smallest
        if (c > best) best = c, pick = t;
      }
      if (pick >= 0 && k == 0 && first_n) *first_n = n;
    }
    if (pick < 0) break;
    out.push_back(pick);
    ctx.push_back(pick);
  }
  return out;
}

}  // namespace mtp::speculative
