// The lookup draft sources: "prompt" (prompt-lookup decoding over each
// sequence's own text, lookup.h) and "history" (the most frequent
// continuation in a datastore of earlier outputs and a corpus, history.h).
// Both are free: no forward, a proposal for every sequence every step, each
// with its evidence class (the matched suffix length n - 1).
#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "speculative/sources/builtin_source.h"
#include "speculative/sources/draft_source.h"
#include "speculative/sources/history.h"

namespace mtp::speculative {

namespace {

using sources_detail::Clock;
using sources_detail::since;

class PromptLookupSource final : public DraftSource {
 public:
  PromptLookupSource(const LookupOptions& o, int slots) : o_(o), slot_(size_t(std::max(1, slots))) {
    o_.validate();
  }
  const char* name() const override { return kPromptSource; }
  int max_len() const override { return o_.max_draft; }
  int classes() const override { return o_.ngram_max; }

  void propose(std::span<ProposeJob> jobs) override {
    for (ProposeJob& j : jobs) {
      const auto t0 = Clock::now();
      MTP_CHECK(j.slot >= 0 && size_t(j.slot) < slot_.size(), "prompt lookup: slot {} of {}",
                j.slot, slot_.size());
      std::optional<PromptLookup>& p = slot_[size_t(j.slot)];
      if (!p) p.emplace(o_);
      p->propose(j.committed, std::min(j.max_len, o_.max_draft), tokens_);
      j.out->assign_chain(tokens_, kPromptSource);
      j.evidence = p->last_class();
      j.seconds = since(t0);
    }
  }
  void release(int slot) override { slot_.at(size_t(slot)).reset(); }

 private:
  LookupOptions o_;
  std::vector<std::optional<PromptLookup>> slot_;  // [slot]: its sequence's tables
  std::vector<int32_t> tokens_;
};

class HistorySource final : public DraftSource {
 public:
  HistorySource(std::shared_ptr<HistoryStore> store, const LookupOptions& o)
      : store_(std::move(store)), max_draft_(o.max_draft) {}
  const char* name() const override { return kHistorySource; }
  int max_len() const override { return max_draft_; }
  int classes() const override { return store_->ngram_max(); }

  void propose(std::span<ProposeJob> jobs) override {
    for (ProposeJob& j : jobs) {
      const auto t0 = Clock::now();
      const int n = store_->propose(j.committed, std::min(j.max_len, max_draft_), tokens_);
      j.out->assign_chain(tokens_, kHistorySource);
      j.evidence = std::max(0, n - 1);
      j.seconds = since(t0);
    }
  }
  // Earlier outputs of this process (the engine calls it for every finished,
  // not cancelled sequence that generated something).
  void finished(std::span<const int32_t> prompt, std::span<const int32_t> output) override {
    store_->add_request(prompt, output);
  }

 private:
  std::shared_ptr<HistoryStore> store_;
  int max_draft_;
  std::vector<int32_t> tokens_;
};

// The store's size when the caller gives none (the CLI's --history-mb default).
constexpr size_t kDefaultHistoryBytes = size_t(64) << 20;

}  // namespace

void register_lookup_sources() {
  register_builtin_source(
      kPromptSource,
      [](const SourceContext& c) -> std::unique_ptr<DraftSource> {
        return std::make_unique<PromptLookupSource>(c.lookup, c.slots);
      },
      "prompt lookup: the continuation of the longest earlier match of the text's last tokens");
  register_builtin_source(
      kHistorySource,
      [](const SourceContext& c) -> std::unique_ptr<DraftSource> {
        c.lookup.validate();
        auto store = c.history ? c.history
                               : std::make_shared<HistoryStore>(c.lookup.ngram_max,
                                                                kDefaultHistoryBytes);
        return std::make_unique<HistorySource>(std::move(store), c.lookup);
      },
      "the most frequent continuation in earlier outputs of this process (and a corpus)");
}

}  // namespace mtp::speculative
