// The lookup sources against their brute-force definitions over random token
// sequences: prompt lookup (longest suffix, most recent earlier occurrence)
// and the history store (most frequent continuation); incremental updates
// equal a rebuild; the history's memory bound holds and eviction equals a
// store built from the documents kept; proposals judged as the text grows
// (ProposalJudge) add up to one judgement against the whole text.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "speculative/sources/draft_source.h"
#include "speculative/sources/history.h"
#include "speculative/sources/lookup.h"

namespace mtp::speculative {
namespace {

std::vector<int32_t> random_seq(std::mt19937& rng, int len, int vocab) {
  std::vector<int32_t> s(static_cast<size_t>(len));
  for (auto& t : s) t = int32_t(rng() % uint32_t(vocab));
  return s;
}

TEST(PromptLookup, EqualsBruteForceIncrementally) {
  std::mt19937 rng(1);
  long nonempty = 0, deep = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int vocab = 2 + int(rng() % 6);
    LookupOptions o;
    o.ngram_max = 1 + int(rng() % 5);
    o.max_draft = 1 + int(rng() % 9);
    const std::vector<int32_t> seq = random_seq(rng, 1 + int(rng() % 120), vocab);
    PromptLookup incremental(o);
    std::vector<int32_t> got;
    // Grow by random chunks (a cycle commits 1..k+1 tokens), proposing after each.
    for (size_t n = 1; n <= seq.size(); n += 1 + rng() % 4) {
      std::span<const int32_t> c(seq.data(), n);
      const int max_k = 1 + int(rng() % 10);
      incremental.propose(c, max_k, got);
      int matched = 0;
      const std::vector<int32_t> want = prompt_lookup_reference(c, o, max_k, &matched);
      ASSERT_EQ(got, want) << "trial " << trial << " at N=" << n;
      // Its evidence class is the matched suffix length - 1 (0 without one).
      ASSERT_EQ(incremental.last_class(), std::max(0, matched - 1)) << "trial " << trial;
      ASSERT_LT(incremental.last_class(), incremental.classes());
      // A rebuild from scratch on the same prefix agrees.
      PromptLookup fresh(o);
      std::vector<int32_t> rebuilt;
      fresh.propose(c, max_k, rebuilt);
      ASSERT_EQ(rebuilt, got);
      nonempty += !got.empty();
      deep += got.size() >= 3;
    }
  }
  EXPECT_GT(nonempty, 100);
  EXPECT_GT(deep, 20);
}

TEST(PromptLookup, PrefersTheLongestThenTheMostRecentMatch) {
  LookupOptions o;
  o.ngram_max = 3;
  o.max_draft = 2;
  // Suffix [1 2 3] occurred at 0..2 (followed by 9 9); [2 3] more recently at
  // 5..6 (followed by 7): the 3-gram wins.
  const std::vector<int32_t> s = {1, 2, 3, 9, 9, 2, 3, 7, 1, 2, 3};
  PromptLookup p(o);
  std::vector<int32_t> out;
  p.propose(s, 8, out);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 9}));
  // A shorter, different sequence restarts the tables.
  p.propose(std::vector<int32_t>{5, 6, 5}, 8, out);
  EXPECT_EQ(out, (std::vector<int32_t>{6, 5}));
}

TEST(PromptLookup, RejectsBadOptions) {
  LookupOptions o;
  o.ngram_max = 0;
  EXPECT_THROW(PromptLookup{o}, InputError);
  o.ngram_max = 4;
  o.max_draft = 0;
  EXPECT_THROW(PromptLookup{o}, InputError);
}

TEST(HistoryStore, EqualsBruteForce) {
  std::mt19937 rng(2);
  long nonempty = 0, deep_match = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int vocab = 2 + int(rng() % 8);
    const int nmax = 1 + int(rng() % 4);
    HistoryStore h(nmax, size_t(1) << 30);
    for (int d = 0; d < 1 + int(rng() % 5); ++d) h.add(random_seq(rng, 1 + int(rng() % 60), vocab));
    for (int q = 0; q < 20; ++q) {
      const auto ctx = random_seq(rng, 1 + int(rng() % 8), vocab + 1);  // may hold an unseen id
      const int max_k = 1 + int(rng() % 8);
      std::vector<int32_t> got;
      const int n = h.propose(ctx, max_k, got);
      int want_n = -1;
      ASSERT_EQ(got, history_reference(h.docs(), nmax, ctx, max_k, &want_n)) << "trial " << trial;
      ASSERT_EQ(n, want_n) << "the first draft's context length, trial " << trial;
      ASSERT_EQ(n == 0, got.empty());
      // The draft source "history" over the same store: its tokens, and its
      // evidence class the first draft's matched length n - 1.
      SourceContext sc;
      sc.history = std::make_shared<HistoryStore>(h);
      sc.lookup.ngram_max = nmax;
      sc.lookup.max_draft = max_k;
      std::unique_ptr<DraftSource> src = make_draft_source(kHistorySource, sc);
      DraftTree tree;
      ProposeJob job;
      job.committed = ctx;
      job.max_len = max_k;
      job.out = &tree;
      src->propose({&job, 1});
      ASSERT_EQ(tree.token, got);
      ASSERT_EQ(job.evidence, std::max(0, n - 1));
      nonempty += !got.empty();
      deep_match += n >= 2;
    }
  }
  EXPECT_GT(nonempty, 200);
  EXPECT_GT(deep_match, 50);
}

TEST(HistoryStore, BoundIsEnforcedAndEvictionEqualsRebuild) {
  std::mt19937 rng(3);
  const int nmax = 3, vocab = 20;
  const size_t budget = 40000;
  HistoryStore h(nmax, budget);
  size_t evictions = 0, before = 0;
  for (int d = 0; d < 200; ++d) {
    h.add(random_seq(rng, 5 + int(rng() % 80), vocab));
    ASSERT_LE(h.memory_bytes(), budget);
    if (h.documents() <= before) ++evictions;
    before = h.documents();
  }
  EXPECT_GT(evictions, 10) << "the budget never forced an eviction";
  // The store equals one built from the documents it kept.
  HistoryStore rebuilt(nmax, size_t(1) << 30);
  for (const auto& doc : h.docs()) rebuilt.add(doc);
  EXPECT_EQ(rebuilt.memory_bytes(), h.memory_bytes());
  for (int q = 0; q < 200; ++q) {
    const auto ctx = random_seq(rng, 1 + int(rng() % 5), vocab);
    std::vector<int32_t> a, b;
    h.propose(ctx, 6, a);
    rebuilt.propose(ctx, 6, b);
    ASSERT_EQ(a, b);
    ASSERT_EQ(a, history_reference(h.docs(), nmax, ctx, 6));
  }
  // A document larger than the whole budget keeps its tail, within the bound.
  const auto big = random_seq(rng, 100000, vocab);
  h.add(big);
  EXPECT_LE(h.memory_bytes(), budget);
  const auto& kept = h.docs().back();
  ASSERT_GT(kept.size(), 0u);
  ASSERT_LT(kept.size(), big.size());
  EXPECT_TRUE(std::equal(kept.begin(), kept.end(), big.end() - long(kept.size())));
}

TEST(HistoryStore, ProposesTheMostFrequentContinuation) {
  HistoryStore h(2, size_t(1) << 20);
  h.add(std::vector<int32_t>{1, 2, 3, 1, 2, 4});
  h.add(std::vector<int32_t>{1, 2, 4, 5});
  std::vector<int32_t> out;
  h.propose(std::vector<int32_t>{7, 1, 2}, 3, out);
  // After [1 2]: 4 twice, 3 once; after [2 4]: 5 once; after [4 5]: nothing, [5]: nothing.
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5}));
}

// Random proposals judged while a random text grows by random steps (a
// draft is right with probability 0.7): per proposal, the verdicts judge each
// position once, in order, and together equal the judgement of the whole
// final text — the common prefix accepted, the first wrong draft rejected,
// nothing past it; a proposal stops waiting once decided.
TEST(ProposalJudge, VerdictsAsTheTextGrowsEqualOneJudgementOfTheWholeText) {
  std::mt19937 rng(17);
  for (int round = 0; round < 50; ++round) {
    const std::vector<int32_t> text = random_seq(rng, 400, 5);
    ProposalJudge j;
    struct Seen {
      size_t n0;
      int from, len, next;  // next: the first position not judged yet
      bool decided = false;
      int matched = -1;
    };
    std::vector<Seen> seen;
    std::vector<std::vector<int32_t>> drafts;
    size_t n = 10;
    while (n < text.size() - 20) {
      // 0..2 proposals at this point, each 1..12 drafts, judged from 0..2.
      for (int k = int(rng() % 3); k > 0; --k) {
        std::vector<int32_t> d;
        for (int i = 0, len = 1 + int(rng() % 12); i < len; ++i)
          d.push_back(rng() % 10 < 7 ? text[n + size_t(i)] : 9);  // 9 never occurs in text
        const int from = int(rng() % 3);
        if (from >= int(d.size())) continue;  // add() keeps nothing to judge
        // The positions below from are right (a caller's precondition).
        bool ok = true;
        for (int i = 0; i < from; ++i) ok &= d[size_t(i)] == text[n + size_t(i)];
        if (!ok) continue;
        j.add(int(seen.size()), n, from, d);
        seen.push_back({n, from, int(d.size()), from});
        drafts.push_back(d);
      }
      n += 1 + rng() % 5;
      j.judge(std::span(text).first(n), [&](const ProposalJudge::Verdict& v) {
        Seen& s = seen[size_t(v.arm)];
        ASSERT_FALSE(s.decided) << "a decided proposal judged again";
        ASSERT_EQ(v.from, s.next) << "positions judged twice or skipped";
        ASSERT_EQ(v.len, s.len);
        ASSERT_GT(std::min(v.known, v.len), v.from);
        s.next = std::min({v.matched + 1, v.known, v.len});
        if (v.matched < std::min(v.known, v.len) || v.matched == v.len) {
          s.decided = true;
          s.matched = v.matched;
        }
      });
    }
    size_t waiting = 0;
    for (size_t a = 0; a < seen.size(); ++a) {
      const Seen& s = seen[a];
      if (s.n0 + size_t(s.len) + 1 > n) {  // the text may not reach its end yet
        waiting += !s.decided;
        continue;
      }
      int m = 0;  // brute force over the whole text
      while (m < s.len && drafts[a][size_t(m)] == text[s.n0 + size_t(m)]) ++m;
      ASSERT_TRUE(s.decided) << "proposal " << a << " still waits with its text known";
      EXPECT_EQ(s.matched, m) << "proposal " << a;
    }
    EXPECT_EQ(j.pending(), waiting);
  }
}

}  // namespace
}  // namespace mtp::speculative
