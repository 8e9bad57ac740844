// The union's gate on scripted sources and a scripted target (a fixed token
// stream): a source that turns useless half-way stops being verified within a
// bounded number of cycles and tokens per verified row recover; a source that
// is always right is preferred; probes stay rare; the output is the target's.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>

#include "speculative/policy/union_proposer.h"

namespace mtp::speculative {
namespace {

// The target's token after a sequence of n tokens is stream[n].
class StreamVerifier : public Verifier {
 public:
  explicit StreamVerifier(const std::vector<int32_t>& s) : s_(s) {}
  void verify(std::span<const int32_t> committed, const DraftTree& tree,
              std::vector<int32_t>& choices) override {
    EXPECT_TRUE(tree.is_chain());
    choices.clear();
    for (size_t j = 0; j <= tree.size(); ++j) choices.push_back(s_[committed.size() + j]);
    rows += long(tree.size()) + 1;
  }
  void commit(std::span<const int32_t>, std::span<const int32_t>) override {}
  long rows = 0;

 private:
  const std::vector<int32_t>& s_;
};

// Proposes `len` tokens: the stream's own (right) while good(N), else wrong ones.
class ScriptedSource : public ChainSource {
 public:
  ScriptedSource(const std::vector<int32_t>& s, int len, std::function<bool(size_t)> good)
      : s_(s), len_(len), good_(std::move(good)) {}
  DraftSource::Kind kind() const override { return kind_; }
  void propose(std::span<const int32_t> c, int max_k, std::vector<int32_t>& out) override {
    out.clear();
    const bool g = good_(c.size());
    for (int j = 0; j < std::min(len_, max_k); ++j) {
      const int32_t t = s_[c.size() + size_t(j)];
      out.push_back(g ? t : t + 1000);  // never the target's token
    }
  }
  DraftSource::Kind kind_ = DraftSource::Kind::Scripted;

 private:
  const std::vector<int32_t>& s_;
  int len_;
  std::function<bool(size_t)> good_;
};

struct UnionRun {
  std::vector<int32_t> tokens;
  std::vector<int> choices;
  std::vector<CycleTrace> trace;
  SpecStats stats;
  long rows = 0;
};

// Cost of a q-row verify: 1 + 0.05 (q - 1) decode steps (memory-bound-like).
CostModel linear_cost(int q_max) {
  CostModel c;
  for (int q = 1; q <= q_max; ++q) c.verify_s.push_back(1 + 0.05 * (q - 1));
  return c;
}

UnionRun run(const std::vector<int32_t>& stream, std::vector<ChainSource*> sources, int n_new,
        int max_k, bool gate = true, GateMemory* memory = nullptr) {
  UnionRun r;
  std::vector<int32_t> committed(stream.begin(), stream.begin() + 4);
  TokenSink sink(nullptr, {}, n_new, {}, nullptr, committed.back());
  StreamVerifier v(stream);
  GateOptions g;
  g.enabled = gate;
  g.learn_costs = false;  // timings of scripted sources are noise: fixed costs
  std::optional<UnionProposer> u;
  const int n = int(sources.size());
  if (memory) {
    u.emplace(std::move(sources), nullptr, 0, max_k,
              memory->get(n, max_k, linear_cost(max_k + 1), g), &r.stats);
  } else {
    u.emplace(std::move(sources), nullptr, 0, max_k, linear_cost(max_k + 1), g, &r.stats);
  }
  r.stats.drafted.assign(size_t(max_k), 0);
  r.stats.accepted.assign(size_t(max_k), 0);
  speculative_loop(v, *u, committed, sink, max_k, 100000, r.stats, &r.trace);
  r.tokens = sink.tokens();
  r.choices = u->choices();
  r.rows = v.rows;
  return r;
}

std::vector<int32_t> random_stream(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> s(n);
  for (auto& t : s) t = int32_t(1 + rng() % 50);
  return s;
}

TEST(Gate, SourceThatTurnsUselessStopsBeingVerified) {
  const auto stream = random_stream(4000, 1);
  const size_t half = 1000;  // right while fewer than `half` tokens are committed
  ScriptedSource s(stream, 6, [&](size_t n) { return n < half; });
  UnionRun r = run(stream, {&s}, 2000, 6);
  ASSERT_EQ(r.tokens, std::vector<int32_t>(stream.begin() + 4, stream.begin() + 4 + 2000));
  // Before the switch it is verified every cycle; after it, within a bounded
  // number of cycles only probes remain.
  size_t switch_cycle = 0;
  while (switch_cycle < r.trace.size() && size_t(r.trace[switch_cycle].n_committed) < half) {
    EXPECT_EQ(r.choices[switch_cycle], 0) << "cycle " << switch_cycle;
    ++switch_cycle;
  }
  ASSERT_LT(switch_cycle + 200, r.trace.size());
  int last_verified_on_merit = -1, probes_after = 0;
  for (size_t c = switch_cycle; c < r.trace.size(); ++c) {
    if (r.choices[c] != 0) continue;
    // A probe comes after an idle interval; merit picks come in a run.
    // Merit: the first-position estimate falls as decay^j (0.9^j) and crosses
    // break-even (α ≈ 0.05 at m(2) = 1.05) after ~29 misses.
    if (c > switch_cycle + 32) ++probes_after; else last_verified_on_merit = int(c);
  }
  EXPECT_LE(last_verified_on_merit - int(switch_cycle), 32);
  const size_t after = r.trace.size() - switch_cycle;
  EXPECT_LE(probes_after, int(after / 16) + 1) << "probes too frequent";
  // Throughput recovers: after the switch nearly every cycle is a 1-row step.
  long rows_after = 0;
  for (size_t c = switch_cycle; c < r.trace.size(); ++c) rows_after += long(r.trace[c].drafts.size()) + 1;
  EXPECT_LT(double(rows_after) / double(after), 1.3);
  // Per-source stats: chosen / probes / proposed are counted.
  const DepthCounts& st = r.stats.sources.at("scripted");
  EXPECT_EQ(st.chosen, long(std::count(r.choices.begin(), r.choices.end(), 0)));
  EXPECT_GE(st.proposed, st.verified());
}

// A gate kept across generations (GateMemory) starts the next generation
// where the last one ended: a useless source explored in the first is only
// probed in the second, where a fresh gate explores it all over again.
TEST(Gate, MemoryCarriesWhatAGenerationLearnedToTheNext) {
  const auto stream = random_stream(1000, 5);
  ScriptedSource useless(stream, 4, [](size_t) { return false; });
  auto verified = [](const UnionRun& r) { return std::count(r.choices.begin(), r.choices.end(), 0); };
  const UnionRun fresh1 = run(stream, {&useless}, 200, 4);
  const UnionRun fresh2 = run(stream, {&useless}, 200, 4);
  GateMemory memory;
  const UnionRun kept1 = run(stream, {&useless}, 200, 4, true, &memory);
  const SourceGate* gate = &*memory.gate;
  const UnionRun kept2 = run(stream, {&useless}, 200, 4, true, &memory);
  const std::vector<int32_t> want(stream.begin() + 4, stream.begin() + 204);
  for (const UnionRun* r : {&fresh1, &fresh2, &kept1, &kept2}) EXPECT_EQ(r->tokens, want);
  EXPECT_EQ(&*memory.gate, gate) << "same shape: the same gate";
  EXPECT_EQ(verified(kept1), verified(fresh1));  // the first generation explores alike
  EXPECT_EQ(verified(fresh2), verified(fresh1));
  ASSERT_GE(verified(fresh2), 3) << "the prior explores the source";
  // The second one only probes: at most one per probe interval (>= 16 cycles).
  EXPECT_LE(verified(kept2), long(kept2.choices.size() / 16 + 1));
  EXPECT_LT(verified(kept2) * 3, verified(fresh2));
  // Another shape (sources, max_k) starts afresh, from the prior.
  SourceGate& other = memory.get(2, 4, linear_cost(5), GateOptions{});
  EXPECT_EQ(other.n_sources(), 2);
  EXPECT_DOUBLE_EQ(other.acceptance(0, 0), GateOptions{}.prior_accept);
}

// Per-q costs are timed and followed separately, so a noisy machine can make
// a 2-row verify look cheaper than a 1-row one; the gate must still read more
// rows as never cheaper (CostModel::at) and a tie as no gain (min_gain), or a
// useless source looks free and is verified on "merit" every cycle.
TEST(Gate, AVerifyOfMoreRowsNeverLooksCheaper) {
  CostModel c{{1.0, 0.95, 1.2}};
  EXPECT_DOUBLE_EQ(c.at(1), 1.0);
  EXPECT_DOUBLE_EQ(c.at(2), 1.0);
  EXPECT_DOUBLE_EQ(c.at(3), 1.2);
  EXPECT_DOUBLE_EQ(c.at(5), 1.2 + 2 * 0.25);
  const auto stream = random_stream(1200, 9);
  ScriptedSource useless(stream, 1, [](size_t) { return false; });
  StreamVerifier v(stream);
  std::vector<int32_t> committed(stream.begin(), stream.begin() + 4);
  TokenSink sink(nullptr, {}, 1000, {}, nullptr, committed.back());
  GateOptions g;
  g.learn_costs = false;
  SpecStats stats;
  stats.drafted.assign(1, 0);
  stats.accepted.assign(1, 0);
  UnionProposer u({&useless}, nullptr, 0, 1, CostModel{{1.0, 0.95}}, g, &stats);
  speculative_loop(v, u, committed, sink, 1, 100000, stats, nullptr);
  const long verified = std::count(u.choices().begin(), u.choices().end(), 0);
  EXPECT_LE(verified, 40) << "of " << u.choices().size() << " cycles";
}

// Runs a one-source gate for `cycles` cycles on a source that is always right
// (every draft accepted), its verifies timed at truth[q - 1] when given;
// returns the chain length chosen each cycle.
std::vector<int> always_right_lengths(SourceGate& g, int cycles, const std::vector<double>* truth) {
  const std::vector<int> avail{g.max_k()};
  std::vector<int> lens;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const SourceGate::Choice c = g.choose(avail);
    EXPECT_EQ(c.source, 0);
    g.observe(0, c.len, c.len);
    if (truth) g.observe_verify(c.len + 1, (*truth)[size_t(c.len)]);
    g.tick(c);
    lens.push_back(c.len);
  }
  return lens;
}

// A verify cost timed in a noisy moment (q = 4 read at 3x its true cost) does
// not lock the gate out of that length: a length probe times it live, the
// live timing replaces the starting point, and the gate moves on to the best
// length (without length probes it verifies 2 drafts forever).
TEST(Gate, ACostTimedInANoisyMomentIsRetimedLive) {
  const std::vector<double> truth{1.0, 1.1, 1.2, 1.3, 1.4};  // seconds of q = 1..5 rows
  for (bool probes : {false, true}) {
    GateOptions o;
    if (!probes) o.length_probe_every = 1 << 30;
    SourceGate g(1, 4, CostModel{{1.0, 1.1, 1.2, 3.9, 1.4}}, o);
    const std::vector<int> lens = always_right_lengths(g, 200, &truth);
    const long at4 = std::count(lens.end() - 50, lens.end(), 4);
    if (probes) {
      EXPECT_GE(at4, 45);
    } else {
      EXPECT_EQ(at4, 0);
    }
  }
}

// A draft position the gate never verifies starts from the estimate of the
// position above it, not from the fixed prior: a source right at every depth,
// first verified 2 drafts deep, is soon verified 3 deep (with the fixed prior
// 0.5 at the third position, 2 drafts look best forever under these costs).
TEST(Gate, ADeeperPositionNeverVerifiedIsPricedFromTheOneAbove) {
  GateOptions o;
  o.learn_costs = false;  // fixed costs, no length probes
  SourceGate g(1, 3, CostModel{{1.0, 1.1, 1.2, 1.45}}, o);
  const std::vector<int> lens = always_right_lengths(g, 50, nullptr);
  EXPECT_EQ(lens.front(), 2);
  EXPECT_GE(std::count(lens.end() - 30, lens.end(), 3), 30);
  EXPECT_GT(g.acceptance(0, 2), 0.9);
}

// Proposes `len` tokens, each the stream's own with probability p (its own
// random draws), else a wrong one.
class NoisySource : public ChainSource {
 public:
  NoisySource(const std::vector<int32_t>& s, int len, double p, unsigned seed)
      : s_(s), len_(len), p_(p), rng_(seed) {}
  DraftSource::Kind kind() const override { return DraftSource::Kind::Scripted; }
  void propose(std::span<const int32_t> c, int max_k, std::vector<int32_t>& out) override {
    out.clear();
    std::bernoulli_distribution right(p_);
    for (int j = 0; j < std::min(len_, max_k); ++j)
      out.push_back(s_[c.size() + size_t(j)] + (right(rng_) ? 0 : 1000));
  }

 private:
  const std::vector<int32_t>& s_;
  int len_;
  double p_;
  std::mt19937 rng_;
};

// Two sources of the same quality: their rolling estimates cross back and
// forth; the gate keeps the one it chose until the other is better by
// min_gain, instead of switching at every crossing.
TEST(Gate, EqualSourcesAreNotSwitchedOnEveryFluctuation) {
  const auto stream = random_stream(3000, 13);
  auto switches = [&](double min_gain) {
    NoisySource a(stream, 3, 0.7, 1), b(stream, 3, 0.7, 2);
    std::vector<int32_t> committed(stream.begin(), stream.begin() + 4);
    TokenSink sink(nullptr, {}, 2000, {}, nullptr, committed.back());
    StreamVerifier v(stream);
    GateOptions g;
    g.learn_costs = false;
    g.min_gain = min_gain;
    SpecStats stats;
    stats.drafted.assign(3, 0);
    stats.accepted.assign(3, 0);
    UnionProposer u({&a, &b}, nullptr, 0, 3, linear_cost(4), g, &stats);
    speculative_loop(v, u, committed, sink, 3, 100000, stats, nullptr);
    EXPECT_EQ(sink.tokens(), std::vector<int32_t>(stream.begin() + 4, stream.begin() + 2004));
    int n = 0, prev = -2;
    for (int c : u.choices()) {
      if (c >= 0 && prev >= 0 && c != prev) ++n;
      if (c >= 0) prev = c;
    }
    return n;
  };
  const int without = switches(0.0), with = switches(GateOptions{}.min_gain);
  ASSERT_GE(without, 20) << "the estimates must cross often for this test to mean anything";
  EXPECT_LT(with * 4, without * 3);  // measured 58 vs 94
}

TEST(Gate, SourceThatRecoversIsChosenAgain) {
  const auto stream = random_stream(4000, 4);
  // Useless while 400 <= N < 900, right otherwise.
  ScriptedSource s(stream, 6, [](size_t n) { return n < 400 || n >= 900; });
  UnionRun r = run(stream, {&s}, 2000, 6);
  ASSERT_EQ(r.tokens, std::vector<int32_t>(stream.begin() + 4, stream.begin() + 4 + 2000));
  size_t back = 0;  // the first cycle at N >= 900
  while (back < r.trace.size() && r.trace[back].n_committed < 900) ++back;
  ASSERT_LT(back + 50, r.trace.size());
  // While useless it was (nearly) never verified; once right again it is
  // verified within a few cycles and then every cycle.
  long verified_useless = 0;
  for (size_t c = 0; c < back; ++c) verified_useless += r.trace[c].n_committed >= 420 && r.choices[c] == 0;
  EXPECT_LE(verified_useless, 40);
  size_t first = back;
  while (first < r.trace.size() && r.choices[first] != 0) ++first;
  EXPECT_LE(first - back, 8u);
  for (size_t c = first + 1; c < r.trace.size(); ++c) ASSERT_EQ(r.choices[c], 0) << "cycle " << c;
}

// A lookup whose first 4 drafts are always right and whose drafts 4..7 are
// wrong while 400 <= N < 900: through that patch the gate verifies 4 of its 8
// drafts (the 4 wrong ones cost rows and add nothing). After it the whole
// proposal is right again, and the gate must see it without verifying those
// positions: the drafts past the verified ones are judged against the text
// the target commits later. When only verified drafts were judged, positions
// 4..7 kept the estimates of the patch and the chains stayed 4 long to the
// end (costs fixed here, so no length probe either).
TEST(Gate, ALookupsDraftsPastTheVerifiedOnesAreJudgedToo) {
  const auto stream = random_stream(4000, 21);
  class TailSource : public ChainSource {
   public:
    explicit TailSource(const std::vector<int32_t>& s) : s_(s) {}
    DraftSource::Kind kind() const override { return DraftSource::Kind::History; }
    void propose(std::span<const int32_t> c, int max_k, std::vector<int32_t>& out) override {
      const size_t n = c.size();
      const bool patch = n >= 400 && n < 900;
      out.clear();
      for (int j = 0; j < std::min(8, max_k); ++j)
        out.push_back(s_[n + size_t(j)] + (patch && j >= 4 ? 1000 : 0));
    }

   private:
    const std::vector<int32_t>& s_;
  } s(stream);
  UnionRun r = run(stream, {&s}, 2500, 8);
  ASSERT_EQ(r.tokens, std::vector<int32_t>(stream.begin() + 4, stream.begin() + 4 + 2500));
  auto share_of_len = [&](int lo, int hi, size_t len) {  // cycles at lo <= N < hi
    long n = 0, of_len = 0;
    for (const CycleTrace& t : r.trace) {
      if (t.n_committed < lo || t.n_committed >= hi) continue;
      ++n;
      of_len += t.drafts.size() == len;
    }
    return n > 0 ? double(of_len) / double(n) : -1.0;
  };
  EXPECT_GT(share_of_len(500, 900, 4), 0.9);   // the patch: 4 drafts
  EXPECT_GT(share_of_len(1100, 2500, 8), 0.9);  // after it: all 8 again
}

TEST(Gate, AlwaysRightSourceIsPreferred) {
  const auto stream = random_stream(3000, 2);
  std::mt19937 rng(5);
  ScriptedSource half(stream, 8, [&](size_t) { return rng() % 2 == 0; });
  ScriptedSource right(stream, 8, [](size_t) { return true; });
  half.kind_ = DraftSource::Kind::History;
  right.kind_ = DraftSource::Kind::PromptLookup;
  for (bool right_first : {false, true}) {
    std::vector<ChainSource*> src = right_first ? std::vector<ChainSource*>{&right, &half}
                                                : std::vector<ChainSource*>{&half, &right};
    UnionRun r = run(stream, src, 1500, 8);
    ASSERT_EQ(r.tokens, std::vector<int32_t>(stream.begin() + 4, stream.begin() + 4 + 1500));
    const long chosen_right = r.stats.sources.at("prompt").chosen;
    EXPECT_GT(double(chosen_right) / double(r.stats.cycles), 0.9);
    EXPECT_GT(r.stats.tokens_per_cycle(), 8.0);
  }
}

// A lookup whose proposals are right exactly when it reports evidence class 1
// (as a long match would be) and wrong in class 0, the classes alternating in
// runs of 3 proposals: the gate judges each class on its own, so class 1 is
// verified (nearly) always and class 0 (nearly) never. With one estimate per
// source both look half right — still worth a verify at these costs — and
// every proposal would be verified.
class ClassedSource : public ChainSource {
 public:
  // class_of(i): the class of the i-th proposal (default: runs of 3).
  ClassedSource(const std::vector<int32_t>& s, int len,
                std::function<int(size_t)> class_of = [](size_t i) { return int(i / 3 % 2); })
      : s_(s), len_(len), class_of_(std::move(class_of)) {}
  DraftSource::Kind kind() const override { return DraftSource::Kind::PromptLookup; }
  void propose(std::span<const int32_t> c, int max_k, std::vector<int32_t>& out) override {
    cls_ = class_of_(calls_++);
    classes_seen.push_back(cls_);
    out.clear();
    for (int j = 0; j < std::min(len_, max_k); ++j) {
      const int32_t t = s_[c.size() + size_t(j)];
      out.push_back(cls_ == 1 ? t : t + 1000);
    }
  }
  int classes() const override { return 2; }
  int last_class() const override { return cls_; }
  std::vector<int> classes_seen;  // per proposal (= per cycle)

 private:
  const std::vector<int32_t>& s_;
  int len_, cls_ = 0;
  size_t calls_ = 0;
  std::function<int(size_t)> class_of_;
};

TEST(Gate, ALookupIsJudgedPerEvidenceClass) {
  const auto stream = random_stream(6000, 8);
  ClassedSource s(stream, 4);
  UnionRun r = run(stream, {&s}, 1500, 4);
  ASSERT_EQ(r.tokens, std::vector<int32_t>(stream.begin() + 4, stream.begin() + 4 + 1500));
  ASSERT_EQ(s.classes_seen.size(), r.choices.size());
  long verified[2] = {0, 0}, cycles[2] = {0, 0};
  for (size_t c = 30; c < r.choices.size(); ++c) {  // after the priors settle
    ++cycles[s.classes_seen[c]];
    verified[s.classes_seen[c]] += r.choices[c] == 0;
  }
  ASSERT_GT(cycles[0], 100);
  ASSERT_GT(cycles[1], 100);
  EXPECT_GT(verified[1], cycles[1] * 95 / 100);
  EXPECT_LT(verified[0], cycles[0] / 20 + 2);
  // Per-source stats count every verified proposal, whichever arm chose it.
  EXPECT_EQ(r.stats.sources.at("prompt").chosen, verified[0] + verified[1] +
                                                   std::count(r.choices.begin(),
                                                              r.choices.begin() + 30, 0));
}

// A drafter (no shadow judgements: it runs only when verified) wrong through
// a hard patch and right again after it is back on merit within a few probes:
// a probe that pays is followed by another at once. With the interval
// doubling after every probe that did not win on merit, the estimate climbed
// back one probe per 128 cycles (here: back 467 cycles after the patch).
TEST(Gate, ADrafterRightAgainAfterAHardPatchIsBackSoon) {
  CostModel dear;  // m(q) = 1 + 0.5 (q - 1): verify rows are dear
  for (int q = 1; q <= 5; ++q) dear.verify_s.push_back(1 + 0.5 * (q - 1));
  GateOptions o;
  o.learn_costs = false;
  SourceGate g(1, 4, dear, o);
  const std::vector<int> avail{4};
  const int patch0 = 100, patch1 = 400;  // wrong at every position in [patch0, patch1)
  int merit_in_patch = 0, back = -1;
  for (int cycle = 0; cycle < 1500 && back < 0; ++cycle) {
    const bool right = cycle < patch0 || cycle >= patch1;
    const SourceGate::Choice c = g.choose(avail);
    if (c.source == 0) {
      if (cycle == patch0 - 1) EXPECT_FALSE(c.probe) << "chosen on merit before the patch";
      g.observe(0, c.len, right ? c.len : 0);
      merit_in_patch += !c.probe && cycle >= patch0 + 50 && cycle < patch1;
      if (cycle >= patch1 && !c.probe) back = cycle;
    }
    g.tick(c);
  }
  EXPECT_EQ(merit_in_patch, 0) << "the patch switched it off";
  ASSERT_GE(back, patch1) << "never chosen on merit again";
  // Back within the first probe after the patch (<= probe_max cycles) and a
  // few more (each one cycle later).
  EXPECT_LE(back - patch1, o.probe_max + 8);
}

// A drafter that beats plain decoding (always right, 2 drafts: 3 tokens per
// 1.05 decodes) beside a lookup far better than it (always right, 8 drafts: 9
// per 1.35): the drafter's probes beat plain but not the lookup they
// displace, so they do not pay — probed once per (doubling) interval, not
// every other cycle (which cost the union a third of its lead over plain).
TEST(Gate, AProbeThatBeatsPlainButNotTheMeritChoiceDoesNotPay) {
  GateOptions o;
  o.learn_costs = false;
  SourceGate g(2, 8, linear_cost(9), o);
  const std::vector<int> avail{8, 2};  // 0: the lookup, 1: the drafter
  int drafter = 0, lookup_on_merit = 0;
  const int cycles = 1000, settle = 50;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const SourceGate::Choice c = g.choose(avail);
    if (c.source >= 0) g.observe(c.source, c.len, c.len);  // both always right
    if (c.source != 0) g.observe_shadow(0, 8, 8, c.source < 0 ? 1 : c.len + 1);
    if (cycle >= settle) {
      drafter += c.source == 1;
      lookup_on_merit += c.source == 0 && !c.probe;
    }
    g.tick(c);
  }
  EXPECT_LE(drafter, (cycles - settle) / o.probe_every + 1) << "probes too frequent";
  EXPECT_GE(lookup_on_merit, (cycles - settle) * 9 / 10);
}

TEST(Gate, UngatedUnionAlwaysVerifiesAProposal) {
  const auto stream = random_stream(1000, 3);
  ScriptedSource wrong(stream, 3, [](size_t) { return false; });
  UnionRun gated = run(stream, {&wrong}, 300, 3, true);
  UnionRun ungated = run(stream, {&wrong}, 300, 3, false);
  EXPECT_EQ(gated.tokens, ungated.tokens);
  EXPECT_EQ(ungated.stats.sources.at("scripted").chosen, ungated.stats.cycles);
  EXPECT_LT(gated.stats.sources.at("scripted").chosen, gated.stats.cycles / 8);
}

TEST(Gate, ExpectedTokensFollowTheRollingAcceptance) {
  GateOptions o;
  o.learn_costs = false;
  SourceGate g(1, 4, linear_cost(5), o);
  EXPECT_DOUBLE_EQ(g.acceptance(0, 0), o.prior_accept);
  for (int i = 0; i < 50; ++i) g.observe(0, 4, 4);  // every draft accepted
  EXPECT_GT(g.acceptance(0, 3), 0.99);
  EXPECT_NEAR(g.expected_tokens(0, 4), 5.0, 0.05);
  for (int i = 0; i < 50; ++i) g.observe(0, 4, 0);  // the first draft rejected
  EXPECT_LT(g.acceptance(0, 0), 0.01);
  EXPECT_GT(g.acceptance(0, 1), 0.99);  // not observed since: unchanged
  const int avail[] = {4};
  EXPECT_EQ(g.choose(avail).source, -1);  // below break-even: plain
}

}  // namespace
}  // namespace mtp::speculative
