// Accept-logic replay: a scripted target (a deterministic function of the
// prefix) and scripted drafters. In every scenario the emitted stream must equal
// the target's own sequential greedy stream, and the counters must be right.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "core/error.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::speculative {
namespace {

constexpr int32_t kEos = 0;

// Target: next token = f(prefix).
using TargetFn = std::function<int32_t(std::span<const int32_t>)>;

int32_t hash_target(std::span<const int32_t> p, int vocab) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : p) h = (h ^ uint64_t(t)) * 1099511628211ull;
  return int32_t(1 + (h >> 17) % uint64_t(vocab - 1));  // never EOS
}

class ScriptedVerifier : public Verifier {
 public:
  explicit ScriptedVerifier(TargetFn f, int forwarded) : f_(std::move(f)), forwarded_(forwarded) {}
  // Any tree: choice after the root, then after each node's path.
  void verify(std::span<const int32_t> committed, const DraftTree& tree,
              std::vector<int32_t>& choices) override {
    // The protocol: the target has forwarded exactly committed.size() - 1 positions.
    EXPECT_EQ(forwarded_, int(committed.size()) - 1);
    choices.clear();
    std::vector<int32_t> seq(committed.begin(), committed.end());
    choices.push_back(f_(seq));
    for (size_t i = 0; i < tree.size(); ++i) {
      std::vector<int32_t> path;
      for (int n = int(i); n >= 0; n = tree.parent[size_t(n)]) path.push_back(tree.token[size_t(n)]);
      std::vector<int32_t> s(committed.begin(), committed.end());
      s.insert(s.end(), path.rbegin(), path.rend());
      choices.push_back(f_(s));
    }
    forwarded_ += tree.max_depth() + 1;
    ++calls;
  }
  void commit(std::span<const int32_t> committed, std::span<const int32_t>) override {
    EXPECT_LE(int(committed.size()) - 1, forwarded_);  // never commits unforwarded positions
    forwarded_ = int(committed.size()) - 1;
  }
  int calls = 0;

 private:
  TargetFn f_;
  int forwarded_;
};

// Drafter: drafts[i] = g(committed, i, correct continuation so far).
class ScriptedProposer : public ChainProposer {
 public:
  using Fn = std::function<void(std::span<const int32_t>, int, std::vector<int32_t>&)>;
  explicit ScriptedProposer(Fn g) : ChainProposer(kScriptedSource), g_(std::move(g)) {}
  void propose_chain(std::span<const int32_t> committed, int max_k,
                     std::vector<int32_t>& drafts) override {
    EXPECT_EQ(committed.size(), last_commit_size == 0 ? committed.size() : last_commit_size);
    g_(committed, max_k, drafts);
  }
  void commit(std::span<const int32_t> committed) override { last_commit_size = committed.size(); }
  size_t last_commit_size = 0;

 private:
  Fn g_;
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::string finish;
  SpecStats stats;
  std::vector<CycleTrace> trace;
};

// The reference: the target alone, greedy, one token at a time.
Outcome sequential(const TargetFn& f, std::vector<int32_t> seq, int n_new, int ctx) {
  Outcome o;
  TokenSink sink(nullptr, {kEos}, n_new, {}, nullptr, seq.back());
  while (!sink.done()) {
    if (int(seq.size()) >= ctx) {
      sink.finish("context");
      break;
    }
    if (!sink.push(f(seq))) break;
    seq.push_back(sink.tokens().back());
  }
  o.tokens = sink.tokens();
  o.finish = sink.finish_reason();
  return o;
}

// Speculative: the first token comes from the prompt forward, as in generate().
Outcome speculative(const TargetFn& f, ScriptedProposer::Fn g, std::vector<int32_t> seq,
                    int n_new, int ctx, int k) {
  Outcome o;
  TokenSink sink(nullptr, {kEos}, n_new, {}, nullptr, seq.back());
  ScriptedVerifier v(f, int(seq.size()));
  ScriptedProposer p(std::move(g));
  o.stats.drafted.assign(k, 0);
  o.stats.accepted.assign(k, 0);
  if (sink.push(f(seq))) {
    seq.push_back(sink.tokens().back());
    speculative_loop(v, p, seq, sink, k, ctx, o.stats, &o.trace);
  }
  o.tokens = sink.tokens();
  o.finish = sink.finish_reason();
  return o;
}

// Drafter factories. `truth` continues a sequence with the target's tokens.
std::vector<int32_t> truth(const TargetFn& f, std::span<const int32_t> c, int n) {
  std::vector<int32_t> s(c.begin(), c.end()), out;
  for (int i = 0; i < n; ++i) out.push_back(f(s)), s.push_back(out.back());
  return out;
}

struct Scenario {
  std::string name;
  std::function<ScriptedProposer::Fn(const TargetFn&)> make;
};

std::vector<Scenario> scenarios(int vocab) {
  std::vector<Scenario> s;
  s.push_back({"perfect", [](const TargetFn& f) {
                 return [f](std::span<const int32_t> c, int k, std::vector<int32_t>& d) {
                   d = truth(f, c, k);
                 };
               }});
  s.push_back({"always_wrong", [vocab](const TargetFn& f) {
                 return [f, vocab](std::span<const int32_t> c, int k, std::vector<int32_t>& d) {
                   d = truth(f, c, k);
                   for (auto& x : d) x = 1 + x % (vocab - 1);  // a different non-EOS token
                 };
               }});
  s.push_back({"random", [vocab](const TargetFn&) {
                 auto rng = std::make_shared<std::mt19937>(7);
                 return [rng, vocab](std::span<const int32_t>, int k, std::vector<int32_t>& d) {
                   d.clear();
                   for (int i = 0; i < k; ++i) d.push_back(int32_t((*rng)() % vocab));
                 };
               }});
  for (int j = 0; j < 4; ++j) {
    s.push_back({"right_then_wrong_at_" + std::to_string(j), [j, vocab](const TargetFn& f) {
                   return [f, j, vocab](std::span<const int32_t> c, int k, std::vector<int32_t>& d) {
                     d = truth(f, c, k);
                     if (j < k) d[j] = 1 + d[j] % (vocab - 1);
                   };
                 }});
  }
  // Drafts that are the truth shifted by one: each draft equals the token the
  // target will produce one position later (the bonus of a shorter prefix).
  s.push_back({"shifted_by_one", [](const TargetFn& f) {
                 return [f](std::span<const int32_t> c, int k, std::vector<int32_t>& d) {
                   auto t = truth(f, c, k + 1);
                   d.assign(t.begin() + 1, t.end());
                 };
               }});
  s.push_back({"fewer_drafts", [](const TargetFn& f) {
                 return [f](std::span<const int32_t> c, int k, std::vector<int32_t>& d) {
                   d = truth(f, c, std::max(0, k - 1 - int(c.size() % 2)));
                 };
               }});
  return s;
}

struct TargetCase {
  std::string name;
  TargetFn f;
};

std::vector<TargetCase> targets(int vocab) {
  return {
      {"hash", [vocab](std::span<const int32_t> p) { return hash_target(p, vocab); }},
      // Long runs of the same token.
      {"repeats", [vocab](std::span<const int32_t> p) {
         return int32_t(1 + (p.size() / 5) % (vocab - 1));
       }},
      // Emits EOS once the sequence reaches 23 tokens.
      {"eos_at_23", [vocab](std::span<const int32_t> p) {
         return p.size() >= 23 ? kEos : hash_target(p, vocab);
       }},
  };
}

TEST(SpecLoop, EveryScenarioReproducesTheSequentialStream) {
  const int vocab = 11;
  const std::vector<int32_t> prompt = {3, 1, 4};
  for (const auto& tc : targets(vocab)) {
    for (const auto& sc : scenarios(vocab)) {
      for (int k = 1; k <= 4; ++k) {
        for (int n_new : {1, 2, 5, 17, 40}) {
          for (int ctx : {12, 64}) {
            SCOPED_TRACE(tc.name + "/" + sc.name + " k=" + std::to_string(k) +
                         " n=" + std::to_string(n_new) + " ctx=" + std::to_string(ctx));
            Outcome ref = sequential(tc.f, prompt, n_new, ctx);
            Outcome got = speculative(tc.f, sc.make(tc.f), prompt, n_new, ctx, k);
            ASSERT_EQ(got.tokens, ref.tokens);
            ASSERT_EQ(got.finish, ref.finish);
            // Counters: recompute from the trace.
            long cycles = long(got.trace.size());
            ASSERT_EQ(got.stats.cycles, cycles);
            std::vector<long> drafted(k, 0), accepted(k, 0);
            for (const auto& c : got.trace) {
              ASSERT_LE(int(c.drafts.size()), k);
              for (size_t i = 0; i < c.drafts.size(); ++i) {
                ++drafted[i];
                if (int(i) < c.accepted) ++accepted[i];
              }
              // The accepted count is the longest correct prefix of the drafts.
              std::vector<int32_t> at(prompt);
              at.insert(at.end(), ref.tokens.begin(),
                        ref.tokens.begin() + (c.n_committed - int(prompt.size())));
              auto right = truth(tc.f, at, int(c.drafts.size()));
              int a = 0;
              while (a < int(c.drafts.size()) && c.drafts[a] == right[a]) ++a;
              ASSERT_EQ(c.accepted, a);
            }
            ASSERT_EQ(got.stats.drafted, drafted);
            ASSERT_EQ(got.stats.accepted, accepted);
            ASSERT_EQ(got.stats.emitted, long(got.tokens.size()) - 1);
          }
        }
      }
    }
  }
}

TEST(SpecLoop, AcceptanceMatchesTheScenario) {
  const int vocab = 11;
  const std::vector<int32_t> prompt = {3, 1, 4};
  auto tcs = targets(vocab);
  const TargetFn& f = tcs[0].f;
  auto all = scenarios(vocab);
  auto find = [&](const std::string& n) {
    for (auto& s : all) {
      if (s.name == n) return s.make(f);
    }
    throw std::runtime_error(n);
  };
  // Perfect drafter: everything accepted, K + 1 tokens per cycle until the end.
  Outcome p = speculative(f, find("perfect"), prompt, 41, 1000, 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(p.stats.accepted[k], p.stats.drafted[k]);
  EXPECT_EQ(p.stats.cycles, 8);  // 40 tokens after the first, 5 per cycle
  // Always wrong: nothing accepted, one token per cycle.
  Outcome w = speculative(f, find("always_wrong"), prompt, 41, 1000, 3);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(w.stats.accepted[k], 0);
  EXPECT_EQ(w.stats.cycles, 40);
  EXPECT_DOUBLE_EQ(w.stats.tokens_per_cycle(), 1.0);
  // Right then wrong at 2: positions 0, 1 always accepted, 2 never, 3 never reached accepted.
  Outcome r = speculative(f, find("right_then_wrong_at_2"), prompt, 41, 1000, 4);
  EXPECT_EQ(r.stats.accepted[0], r.stats.drafted[0]);
  EXPECT_EQ(r.stats.accepted[1], r.stats.drafted[1]);
  EXPECT_EQ(r.stats.accepted[2], 0);
  EXPECT_EQ(r.stats.accepted[3], 0);
}

// The loop must be able to fail: a verifier that lies (accepts a wrong draft)
// produces a stream different from the sequential one.
TEST(SpecLoop, ReplayDetectsABrokenAcceptRule) {
  const int vocab = 11;
  TargetFn f = [](std::span<const int32_t> p) { return hash_target(p, 11); };
  class Lying : public ScriptedVerifier {
   public:
    using ScriptedVerifier::ScriptedVerifier;
    void verify(std::span<const int32_t> c, const DraftTree& d,
                std::vector<int32_t>& ch) override {
      ScriptedVerifier::verify(c, d, ch);
      if (!d.empty()) ch[0] = d.token[0];  // "accepts" the first draft whatever it is
    }
  };
  std::vector<int32_t> seq = {3, 1, 4};
  TokenSink sink(nullptr, {kEos}, 20, {}, nullptr, 4);
  Lying v(f, 3);
  ScriptedProposer p([](std::span<const int32_t>, int k, std::vector<int32_t>& d) {
    d.assign(k, 5);
  });
  sink.push(f(seq));
  seq.push_back(sink.tokens().back());
  SpecStats st;
  speculative_loop(v, p, seq, sink, 2, 100, st);
  EXPECT_NE(sink.tokens(), sequential(f, {3, 1, 4}, 20, 100).tokens);
  (void)vocab;
}


namespace {
// A tree drafter: at each depth `width` children under the node it extends —
// the target's token placed first, last, first and last (a duplicated right
// sibling: the first is the one accepted) or not at all among wrong siblings
// (one of which duplicates another) — and it extends the right child when
// there is one (its first copy), else its first child.
enum class RightAt { First, Last, Twice, Absent };

class TreeProposer : public Proposer {
 public:
  TreeProposer(TargetFn f, int vocab, int width, RightAt where, int absent_from_depth)
      : f_(std::move(f)), vocab_(vocab), width_(width), where_(where),
        absent_from_(absent_from_depth) {}
  void propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) override {
    std::vector<int32_t> seq(committed.begin(), committed.end());
    int parent = -1;
    for (int depth = 0; depth < max_k; ++depth) {
      const int32_t right = f_(seq);
      std::vector<int32_t> kids;
      for (int w = 0; w + 1 < width_; ++w) kids.push_back(1 + (right + w) % (vocab_ - 1));
      if (kids.size() >= 2) kids[1] = kids[0];  // a duplicate sibling
      const bool absent = where_ == RightAt::Absent && depth >= absent_from_;
      if (!absent) {
        if (where_ == RightAt::First || where_ == RightAt::Twice) kids.insert(kids.begin(), right);
        if (where_ == RightAt::Last || where_ == RightAt::Twice) kids.push_back(right);
      }
      int next = -1;
      for (int32_t t : kids) {
        const int n = tree.push(t, parent, {kScriptedSource, 0});
        if (t == right && next < 0) next = n;
      }
      if (next < 0) break;  // the right token is not in the tree: nothing deeper can be accepted
      parent = next;
      seq.push_back(right);
    }
  }
  void commit(std::span<const int32_t>) override {}

 private:
  TargetFn f_;
  int vocab_, width_;
  RightAt where_;
  int absent_from_;
};
}  // namespace

// Trees: the right branch first, last or absent, duplicate siblings, EOS and
// the -n limit inside a branch — the output is always the sequential stream
// and the depth counters follow the trace.
TEST(SpecLoop, TreesReproduceTheSequentialStream) {
  const int vocab = 11;
  const std::vector<int32_t> prompt = {3, 1, 4};
  for (const auto& tc : targets(vocab)) {
    for (RightAt where : {RightAt::First, RightAt::Last, RightAt::Twice, RightAt::Absent}) {
      for (int width : {1, 2, 3}) {
        for (int k = 1; k <= 4; ++k) {
          for (int n_new : {1, 5, 17, 40}) {
            SCOPED_TRACE(tc.name + " where=" + std::to_string(int(where)) +
                         " width=" + std::to_string(width) + " k=" + std::to_string(k) +
                         " n=" + std::to_string(n_new));
            Outcome ref = sequential(tc.f, prompt, n_new, 64);
            Outcome got;
            got.stats.drafted.assign(k, 0);
            got.stats.accepted.assign(k, 0);
            std::vector<int32_t> seq = prompt;
            TokenSink sink(nullptr, {kEos}, n_new, {}, nullptr, seq.back());
            ScriptedVerifier v(tc.f, int(seq.size()));
            TreeProposer p(tc.f, vocab, width, where, /*absent_from_depth=*/1);
            if (sink.push(tc.f(seq))) {
              seq.push_back(sink.tokens().back());
              speculative_loop(v, p, seq, sink, k, 64, got.stats, &got.trace);
            }
            ASSERT_EQ(sink.tokens(), ref.tokens);
            ASSERT_EQ(sink.finish_reason(), ref.finish);
            std::vector<long> drafted(k, 0), accepted(k, 0);
            long nodes = 0, drafting_cycles = 0;
            for (const auto& c : got.trace) {
              drafting_cycles += c.drafts.empty() ? 0 : 1;
              DraftTree t;
              for (size_t i = 0; i < c.drafts.size(); ++i) {
                t.push(c.drafts[i], c.parents[i], {kScriptedSource, 0});
              }
              nodes += long(t.size());
              for (int d = 0; d < t.max_depth(); ++d) {
                ++drafted[d];
                if (d < c.accepted) ++accepted[d];
              }
              // The accepted path is a root path whose tokens are the target's.
              // With a duplicated right sibling, the first copy.
              int parent = -1;
              for (int32_t n : c.accepted_nodes) {
                ASSERT_EQ(t.parent[size_t(n)], parent);
                for (int32_t m = 0; m < n; ++m) {
                  ASSERT_FALSE(t.parent[size_t(m)] == parent && t.token[size_t(m)] == t.token[size_t(n)])
                      << "node " << n << " accepted over an equal earlier sibling " << m;
                }
                parent = n;
              }
            }
            ASSERT_EQ(got.stats.drafted, drafted);
            ASSERT_EQ(got.stats.accepted, accepted);
            ASSERT_EQ(got.stats.nodes, nodes);
            ASSERT_EQ(got.stats.sources.count("scripted") > 0, nodes > 0);
            if (nodes > 0) {
              // A proposer without counts of its own: every node it drafted was
              // proposed and verified, and it was chosen in every drafting cycle.
              const DepthCounts& src = got.stats.sources.at("scripted");
              ASSERT_EQ(src.proposed, nodes);
              ASSERT_EQ(src.verified(), nodes);
              ASSERT_EQ(src.chosen, drafting_cycles);
            }
          }
        }
      }
    }
  }
}

TEST(DraftTree, AcceptFollowsTheChosenChildAndNamesTheNextToken) {
  DraftTree t;
  const DraftOrigin s{kScriptedSource, 0};
  t.push(5, -1, s);  // 0
  t.push(6, -1, s);  // 1
  t.push(7, 1, s);   // 2
  t.push(8, 1, s);   // 3
  t.push(9, 3, s);   // 4
  EXPECT_FALSE(t.is_chain());
  EXPECT_EQ(t.depth(4), 3);
  EXPECT_EQ(t.max_depth(), 3);
  // choices: root -> 6 (node 1); after node 1 -> 8 (node 3); after node 3 -> 9 (node 4); after 4 -> 2.
  std::vector<int32_t> ch(t.size() + 1, 0);
  ch[0] = 6;              // root -> node 1
  ch[size_t(1) + 1] = 8;  // after node 1 -> node 3
  ch[size_t(3) + 1] = 9;  // after node 3 -> node 4
  ch[size_t(4) + 1] = 2;  // after node 4: the bonus token
  DraftTree::Accepted a = t.accept(ch);
  EXPECT_EQ(a.nodes, (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(a.next, 2);
  // Root choice absent from the tree: nothing accepted, the choice is the correction.
  ch[0] = 4;
  a = t.accept(ch);
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_EQ(a.next, 4);
  // A wrong number of choices is a bug in the verifier.
  EXPECT_THROW(t.accept(std::vector<int32_t>{1, 2}), InternalError);
  EXPECT_THROW(t.push(1, 7, s), InternalError);
}

// The sink's per-token events (the server's stream): one per emitted token,
// in order, marked drafted exactly for the accepted drafts; then the close
// event (id -1); a callback returning false cancels.
TEST(SpecLoop, TokenEventsCarryOriginsAndCanCancel) {
  const int vocab = 50;
  TargetFn f = [&](std::span<const int32_t> p) { return hash_target(p, vocab); };
  for (int cancel_at : {0, 7}) {
    // Two right drafts, then a wrong one, every cycle.
    ScriptedProposer p([&](std::span<const int32_t> c, int k, std::vector<int32_t>& d) {
      d = truth(f, c, k);
      if (d.size() > 2) d[2] = 1 + d[2] % (vocab - 1);
    });
    std::vector<int32_t> seq = {5, 6, 7};
    std::vector<int32_t> ids;
    int drafted = 0, closes = 0;
    TokenSink sink(nullptr, {kEos}, 40, {}, nullptr, seq.back());
    sink.set_token_callback([&](int32_t t, const DraftOrigin* src, std::string_view) {
      if (t < 0) {
        ++closes;
        return true;
      }
      ids.push_back(t);
      if (src) {
        ++drafted;
        EXPECT_TRUE(src->is(kScriptedSource));
      }
      return cancel_at == 0 || int(ids.size()) < cancel_at;
    });
    ScriptedVerifier v(f, int(seq.size()));
    SpecStats stats;
    stats.drafted.assign(3, 0);
    stats.accepted.assign(3, 0);
    ASSERT_TRUE(sink.push(f(seq)));
    seq.push_back(sink.tokens().back());
    speculative_loop(v, p, seq, sink, 3, 1000, stats);
    sink.close();
    EXPECT_EQ(ids, sink.tokens());
    EXPECT_EQ(closes, 1);
    if (cancel_at == 0) {
      EXPECT_EQ(sink.finish_reason(), "length");
      EXPECT_EQ(ids, sequential(f, {5, 6, 7}, 40, 1000).tokens);
      long accepted = 0;
      for (long a : stats.accepted) accepted += a;
      EXPECT_GT(accepted, 0);
      // Every accepted draft was emitted as drafted (the last cycle may stop early).
      EXPECT_LE(drafted, accepted);
      EXPECT_GE(drafted, accepted - 2);
    } else {
      EXPECT_EQ(sink.finish_reason(), "cancelled");
      EXPECT_EQ(int(ids.size()), cancel_at);
    }
  }
}

}  // namespace
}  // namespace mtp::speculative
