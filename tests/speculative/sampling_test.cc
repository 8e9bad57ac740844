// Speculative decoding at temperature > 0 (sampler.h):
//  - coupled sampling: speculative output == plain output, token for token,
//    for every seed and truncation setting, every family; a sequential-RNG
//    variant must break it;
//  - plain, coupled and rejection sampling are exact samples of the target's
//    distribution (the exact joint distribution of the first 3 tokens of a
//    vocabulary-8 model, enumerated from its own logits), and deliberately
//    broken acceptance rules are caught by the same test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <iostream>
#include <ostream>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "drafter/drafter.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/mtp_source.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/target_session.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

using test::load_target;
using test::random_drafter;
using test::Target;

SamplerOptions sampling(float temp, int top_k, float top_p, float min_p, uint64_t seed) {
  SamplerOptions o;
  o.temperature = temp;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.seed = seed;
  return o;
}

const SamplerOptions kSettings[] = {
    sampling(0.7f, 0, 1.f, 0.f, 0), sampling(1.f, 5, 1.f, 0.f, 0),
    sampling(0.9f, 0, 0.8f, 0.f, 0), sampling(1.3f, 0, 1.f, 0.1f, 0),
    sampling(1.f, 4, 0.9f, 0.05f, 0)};

// Returns how many drafts were accepted, so callers can check speculation ran.
long expect_coupled_identity(const Target& t, const drafter::Drafter& d, int seeds, int n_new,
                             bool expect_equal = true, long* differing = nullptr) {
  std::mt19937 rng(11);
  long accepted = 0;
  for (const SamplerOptions& base : kSettings) {
    for (int s = 0; s < seeds; ++s) {
      SamplerOptions so = base;
      so.seed = uint64_t(1000 + s);
      std::vector<int32_t> prompt = test::random_tokens(rng, 1 + s % 5, t.model->config().vocab);
      GenerateOptions go;
      go.n_new = n_new;
      go.sampler = so;
      GenerateResult plain = generate(*t.model, nullptr, prompt, go, nullptr);
      for (int K = 1; K <= d.config().K; ++K) {
        SpecOptions sp;
        sp.drafter = &d;
        sp.draft_k = K;
        GenerateResult r = generate(*t.model, nullptr, prompt, go, nullptr, nullptr, sp);
        if (expect_equal) {
          EXPECT_EQ(r.token_ids, plain.token_ids)
              << "seed " << so.seed << " T " << so.temperature << " top-k " << so.top_k
              << " top-p " << so.top_p << " min-p " << so.min_p << " K " << K;
        } else if (differing) {
          *differing += r.token_ids != plain.token_ids;
        }
        for (long a : r.stats->accepted) accepted += a;
      }
    }
  }
  return accepted;
}

TEST(CoupledSampling, SpeculativeEqualsPlainOnEveryFamily) {
  for (model::Arch a : {model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3,
                        model::Arch::Gemma2, model::Arch::Gemma3}) {
    SCOPED_TRACE(model::arch_name(a));
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    spec.vocab = 12;  // random drafts are right often enough to be accepted
    spec.eos_ids = {};
    if (a == model::Arch::Gemma2 || a == model::Arch::Gemma3) spec.sliding_window = 7;
    Target t = load_target(test::random_hf_checkpoint("coupled", spec));
    drafter::Drafter d = random_drafter(t, 3, 5);
    EXPECT_GT(expect_coupled_identity(t, d, 4, 24), 0) << "no draft was ever accepted";
  }
}

TEST(CoupledSampling, SpeculativeEqualsPlainOnStories260K) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  Target t = load_target(path);
  drafter::Drafter d = random_drafter(t, 3, 8);
  expect_coupled_identity(t, d, 3, 40);
}

// The test above must be able to fail: noise drawn from a sequential RNG
// (not keyed by position) makes the verifier's draws differ from plain's.
TEST(CoupledSampling, ASequentialRngBreaksTheIdentity) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 12;
  spec.eos_ids = {};
  Target t = load_target(test::random_hf_checkpoint("coupled-seq", spec));
  drafter::Drafter d = random_drafter(t, 3, 5);
  std::mt19937 rng(3);
  long differing = 0;
  for (int s = 0; s < 8; ++s) {
    GenerateOptions go;
    go.n_new = 24;
    go.sampler = sampling(1.f, 0, 1.f, 0.f, uint64_t(s));
    go.sampler.sequential_noise_fault = true;
    std::vector<int32_t> prompt = test::random_tokens(rng, 3, spec.vocab);
    GenerateResult plain = generate(*t.model, nullptr, prompt, go, nullptr);
    SpecOptions sp;
    sp.drafter = &d;
    GenerateResult r = generate(*t.model, nullptr, prompt, go, nullptr, nullptr, sp);
    differing += r.token_ids != plain.token_ids;
  }
  EXPECT_GT(differing, 0);
}

TEST(KeyedNoise, ADrawDependsOnlyOnSeedPositionAndToken) {
  std::vector<float> row = {0.1f, 0.5f, -0.3f, 0.9f, 0.0f, 0.2f};
  Sampler a(sampling(1.f, 0, 1.f, 0.f, 7)), b(sampling(1.f, 0, 1.f, 0.f, 7));
  // b draws elsewhere first: a's and b's draw at position 40 are still equal.
  for (int64_t p = 0; p < 30; ++p) b.sample(row.data(), row.size(), p);
  EXPECT_EQ(a.sample(row.data(), row.size(), 40), b.sample(row.data(), row.size(), 40));
  // Different positions give different draws (not all the same token).
  std::map<int32_t, int> seen;
  for (int64_t p = 0; p < 200; ++p) ++seen[a.sample(row.data(), row.size(), p)];
  EXPECT_GE(seen.size(), 4u);
  EXPECT_EQ(keyed_uniform(1, 2, 3, NoiseStream::Choice), keyed_uniform(1, 2, 3, NoiseStream::Choice));
  EXPECT_NE(keyed_uniform(1, 2, 3, NoiseStream::Choice), keyed_uniform(1, 2, 3, NoiseStream::Draft));
  EXPECT_NE(keyed_uniform(1, 2, 3, NoiseStream::Choice), keyed_uniform(1, 3, 3, NoiseStream::Choice));
}

TEST(Truncation, TheDocumentedOrder) {
  // probabilities at T = 1 of logits log([0.4, 0.3, 0.2, 0.1]) (+ a constant)
  std::vector<float> row = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  TokenDist d;
  Sampler(sampling(1.f, 0, 1.f, 0.f, 0)).distribution(row.data(), 4, nullptr, d);
  ASSERT_EQ(d.ids, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_NEAR(d.p[3], 0.1, 1e-6);
  Sampler(sampling(1.f, 3, 1.f, 0.f, 0)).distribution(row.data(), 4, nullptr, d);
  ASSERT_EQ(d.ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(d.p[0], 0.4 / 0.9, 1e-6);
  // top-p 0.7 keeps {0.4, 0.3} (mass 0.7 reached), then renormalises.
  Sampler(sampling(1.f, 0, 0.7f, 0.f, 0)).distribution(row.data(), 4, nullptr, d);
  ASSERT_EQ(d.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(d.p[1], 0.3 / 0.7, 1e-6);
  // min-p 0.45: drop p < 0.18 (0.45 x 0.4): keeps 0.4, 0.3, 0.2.
  Sampler(sampling(1.f, 0, 1.f, 0.45f, 0)).distribution(row.data(), 4, nullptr, d);
  ASSERT_EQ(d.ids, (std::vector<int32_t>{0, 1, 2}));
  // Temperature 2 flattens: p ∝ sqrt(p).
  Sampler(sampling(2.f, 0, 1.f, 0.f, 0)).distribution(row.data(), 4, nullptr, d);
  const double z = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.2) + std::sqrt(0.1);
  EXPECT_NEAR(d.p[0], std::sqrt(0.4) / z, 1e-6);
  // Temperature 0 is the argmax with ties to the lowest index.
  std::vector<float> tie = {1.f, 3.f, 3.f, 0.f};
  EXPECT_EQ(Sampler(SamplerOptions{}).sample(tie.data(), 4, 0), 1);
  // Bad values are refused naming them.
  for (SamplerOptions bad : {sampling(-1.f, 0, 1.f, 0.f, 0), sampling(NAN, 0, 1.f, 0.f, 0),
                             sampling(1.f, -1, 1.f, 0.f, 0), sampling(1.f, 0, 0.f, 0.f, 0),
                             sampling(1.f, 0, 1.5f, 0.f, 0), sampling(1.f, 0, NAN, 0.f, 0),
                             sampling(1.f, 0, 1.f, 1.f, 0), sampling(1.f, 0, 1.f, -0.1f, 0),
                             sampling(INFINITY, 0, 1.f, 0.f, 0)}) {
    EXPECT_THROW(bad.validate(), InputError);
  }
}

// The kept ids by the documented order (sampler.h), computed the slow way:
// every candidate sorted for top-p. The reference for keep()'s sorted prefix.
std::vector<int32_t> reference_kept(const std::vector<float>& row, const SamplerOptions& o) {
  const size_t n = row.size();
  auto fin = [&](size_t c) { return std::isnan(row[c]) ? -INFINITY : row[c]; };
  auto better = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<int32_t> cols;
  if (o.top_k > 0 && size_t(o.top_k) < n) {
    std::vector<std::pair<float, int32_t>> all;
    for (size_t c = 0; c < n; ++c) all.push_back({fin(c), int32_t(c)});
    std::sort(all.begin(), all.end(), better);
    for (int i = 0; i < o.top_k; ++i) cols.push_back(all[size_t(i)].second);
    std::sort(cols.begin(), cols.end());
  } else {
    for (size_t c = 0; c < n; ++c) cols.push_back(int32_t(c));
  }
  const double inv_t = 1.0 / double(o.temperature);
  std::vector<double> lp;
  double mx = -INFINITY, sum = 0;
  for (int32_t c : cols) mx = std::max(mx, double(fin(size_t(c))) * inv_t);
  for (int32_t c : cols) lp.push_back(double(fin(size_t(c))) * inv_t - mx), sum += std::exp(lp.back());
  if (o.top_p < 1.f) {
    std::vector<std::pair<float, int32_t>> ord;
    for (size_t i = 0; i < cols.size(); ++i) ord.push_back({float(lp[i]), int32_t(i)});
    std::sort(ord.begin(), ord.end(), better);
    double cum = 0;
    std::vector<bool> in(cols.size(), false);
    for (const auto& [l, i] : ord) {
      in[size_t(i)] = true;
      cum += std::exp(lp[size_t(i)]) / sum;
      if (cum >= double(o.top_p)) break;
    }
    std::vector<int32_t> c2;
    std::vector<double> l2;
    for (size_t i = 0; i < cols.size(); ++i) {
      if (in[i]) c2.push_back(cols[i]), l2.push_back(lp[i]);
    }
    cols = c2, lp = l2;
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < cols.size(); ++i) {
    if (lp[i] != -INFINITY && !(o.min_p > 0.f && lp[i] < std::log(double(o.min_p)))) out.push_back(cols[i]);
  }
  return out;
}

// keep()'s sorted prefix gives the kept set of a full sort, and the skip bar
// of sample() and top() changes no choice: equal, choice for choice, to
// scoring every kept candidate — over flat, peaked and tied rows with NaN and
// −inf entries, every truncation, vocabularies 1..4096, ids remapped or not.
// sample_dist skips ids that cannot win; it must pick what scoring every id
// (log p + keyed Gumbel, the first of equal scores) picks.
// A row of nothing but NaN (a forward that overflowed fp32) is an error
// naming the position, not token 0 (argmax skips NaN: a model whose down_proj
// held 3e38 generated token 0 eight times with exit 0), greedy and sampled
// alike; one NaN among numbers never wins.
TEST(Sampler, ARowOfNaNIsAnErrorNotAToken) {
  for (float temp : {0.f, 0.8f}) {
    std::vector<float> row = {0.5f, std::nanf(""), -1.0f, 0.25f};
    Sampler s(sampling(temp, 0, 1.f, 0.f, 0));
    EXPECT_NE(s.sample(row.data(), row.size(), 7), 1) << "temperature " << temp;
    std::fill(row.begin(), row.end(), std::nanf(""));
    test::expect_error<InputError>([&] { s.sample(row.data(), row.size(), 7); },
                                   {"position 7", "all NaN", "overflows"});
  }
}

TEST(Sampler, SampleDistEqualsScoringEveryId) {
  std::mt19937 rng(11);
  for (size_t n : {size_t(1), size_t(2), size_t(9), size_t(500), size_t(32000)}) {
    for (int kind = 0; kind < 4; ++kind) {
      TokenDist d;
      std::normal_distribution<double> nd(0, kind == 1 ? 6.0 : 1.5);
      for (size_t i = 0; i < n; ++i) {
        d.ids.push_back(int32_t(3 * i + 1));
        double w = std::exp(nd(rng));
        if (kind == 2) w = double(1 + rng() % 3);    // many equal probabilities
        if (kind == 3 && rng() % 3 == 0) w = 0;      // zeros (a residual)
        d.p.push_back(w);
      }
      double sum = 0;
      for (double x : d.p) sum += x;
      for (double& x : d.p) x = kind == 1 ? x : x / std::max(sum, 1e-300);  // kind 1 unnormalised
      for (int64_t pos = 0; pos < 40; ++pos) {
        int32_t want = -1;
        double best = -INFINITY;
        for (size_t i = 0; i < n; ++i) {
          if (!(d.p[i] > 0)) continue;
          const double sc = std::log(d.p[i]) + keyed_gumbel(7, pos, d.ids[i], NoiseStream::Residual);
          if (sc > best) best = sc, want = d.ids[i];
        }
        ASSERT_EQ(sample_dist(d, 7, pos, NoiseStream::Residual), want)
            << "n " << n << " kind " << kind << " pos " << pos;
      }
    }
  }
  TokenDist none{{4, 5}, {0.0, 0.0}};
  EXPECT_EQ(sample_dist(none, 1, 0, NoiseStream::Draft), -1);
}

TEST(Sampler, PrunedScoringEqualsScoringEveryCandidate) {
  std::mt19937 rng(3);
  long scored_choices = 0;
  for (size_t n : {size_t(1), size_t(7), size_t(300), size_t(4096)}) {
    for (int kind = 0; kind < 5; ++kind) {
      const float sigma[] = {0.3f, 3.f, 12.f, 1.f, 3.f};
      std::normal_distribution<float> nd(0.f, sigma[kind]);
      std::vector<float> row(n);
      for (float& x : row) x = kind == 3 ? std::round(nd(rng) * 2) : nd(rng);  // 3: many ties
      if (kind == 4 && n > 2) row[1] = NAN, row[n / 2] = -INFINITY;
      std::vector<int32_t> ids(n);
      for (size_t i = 0; i < n; ++i) ids[i] = int32_t(3 * i + 1);
      for (SamplerOptions o : {sampling(1.f, 0, 1.f, 0.f, 9), sampling(0.5f, 0, 0.9f, 0.f, 9),
                               sampling(2.f, 40, 1.f, 0.f, 9), sampling(0.8f, 0, 0.95f, 0.05f, 9),
                               sampling(1.f, 3, 0.3f, 0.f, 9), sampling(0.7f, 0, 1.f, 0.02f, 9)}) {
        TokenDist d;
        Sampler(o).distribution(row.data(), n, nullptr, d);
        ASSERT_EQ(d.ids, reference_kept(row, o)) << "n " << n << " kind " << kind;
        SamplerOptions every = o;
        every.score_every_candidate = true;
        Sampler fast(o), slow(every);
        std::vector<Sampler::Candidate> a, b;
        for (int64_t pos = 0; pos < 40; ++pos) {
          const int32_t* id_map = pos % 2 ? ids.data() : nullptr;
          ASSERT_EQ(fast.sample(row.data(), n, pos, id_map), slow.sample(row.data(), n, pos, id_map))
              << "n " << n << " kind " << kind << " pos " << pos;
          const size_t w = size_t(1 + pos % 8);
          fast.top(row.data(), n, pos, id_map, w, true, a, NoiseStream::Draft);
          slow.top(row.data(), n, pos, id_map, w, true, b, NoiseStream::Draft);
          ASSERT_EQ(a.size(), b.size());
          for (size_t i = 0; i < a.size(); ++i) {
            ASSERT_EQ(a[i].id, b[i].id) << "n " << n << " kind " << kind << " pos " << pos << " rank " << i;
            ASSERT_EQ(a[i].prob, b[i].prob);
          }
          ASSERT_TRUE(a.empty() || a[0].id == fast.sample(row.data(), n, pos, id_map, NoiseStream::Draft));
          scored_choices += long(a.size());
        }
      }
    }
  }
  EXPECT_GT(scored_choices, 0);
}

// ---- exact distribution of the first 3 generated tokens ----

constexpr int kVocab = 8, kTokens = 3;

// The exact joint distribution of the first kTokens tokens after `prompt`
// under `so` (kept distributions from the target's own logits).
std::vector<double> exact_joint(const model::Model& m, const std::vector<int32_t>& prompt,
                                const SamplerOptions& so) {
  std::vector<double> joint(size_t(std::pow(kVocab, kTokens)), 0.0);
  Sampler s(so);
  TokenDist d1, d2, d3;
  for (int t1 = 0; t1 < kVocab; ++t1) {
    for (int t2 = 0; t2 < kVocab; ++t2) {
      std::vector<int32_t> seq = prompt;
      seq.push_back(t1);
      seq.push_back(t2);
      model::KVCache kv = m.make_cache(1, int(seq.size()) + 1);
      test::RowOutputs out = test::run_chunks(m, kv, 0, seq, {1}, nullptr);
      const size_t P = prompt.size();
      s.distribution(out.logits.data() + (P - 1) * kVocab, kVocab, nullptr, d1);
      s.distribution(out.logits.data() + P * kVocab, kVocab, nullptr, d2);
      s.distribution(out.logits.data() + (P + 1) * kVocab, kVocab, nullptr, d3);
      for (int t3 = 0; t3 < kVocab; ++t3) {
        joint[size_t((t1 * kVocab + t2) * kVocab + t3)] = d1.prob(t1) * d2.prob(t2) * d3.prob(t3);
      }
    }
  }
  return joint;
}

enum class Mode { Plain, Coupled, Rejection, RejectionFixedDrafts };

// Drafts the same tokens every cycle, with no distribution: rejection
// sampling treats them as point masses.
class FixedProposer : public ChainProposer {
 public:
  FixedProposer() : ChainProposer(kScriptedSource) {}
  void propose_chain(std::span<const int32_t>, int max_k, std::vector<int32_t>& d) override {
    d.clear();
    for (int k = 0; k < max_k; ++k) d.push_back(int32_t(3 + k));
  }
  void commit(std::span<const int32_t>) override {}
};

// N samples of the first kTokens tokens, seeds 0..N-1.
std::vector<double> empirical(const model::Model& m, const drafter::Drafter& d,
                              const std::vector<int32_t>& prompt, SamplerOptions so, Mode mode,
                              int K, int N, TargetVerifier::Fault fault) {
  std::vector<double> freq(size_t(std::pow(kVocab, kTokens)), 0.0);
  for (int s = 0; s < N; ++s) {
    so.seed = uint64_t(s) * 7919 + 13;
    std::vector<int32_t> out;
    if (mode == Mode::Plain) {
      GenerateOptions go;
      go.n_new = kTokens;
      go.sampler = so;
      out = generate(m, nullptr, prompt, go, nullptr).token_ids;
    } else {
      // The speculative loop with an injectable verifier fault.
      TargetSession target(m, int(prompt.size()) + kTokens + K + 2, nullptr);
      std::vector<float> logits(size_t(m.config().vocab));
      target.prefill(prompt, logits.data());
      const SpecSampling sm = mode == Mode::Coupled ? SpecSampling::Coupled : SpecSampling::Rejection;
      MtpSource source(m, d, 1, target.ctx(), K);
      SourceProposer mtp(source, target, so, sm);
      FixedProposer fixed;
      Proposer& proposer = mode == Mode::RejectionFixedDrafts ? static_cast<Proposer&>(fixed) : mtp;
      TokenSink sink(nullptr, {}, kTokens, {}, nullptr, prompt.back());
      Sampler first(so);
      std::vector<int32_t> committed = prompt;
      if (sink.push(first.sample(logits.data(), logits.size(), int64_t(committed.size())))) {
        committed.push_back(sink.tokens().back());
        TargetVerifier verifier(target, so, sm);
        verifier.inject_fault(fault);
        SpecStats st;
        speculative_loop(verifier, proposer, committed, sink, K, target.ctx(), st);
      }
      out = sink.tokens();
    }
    if (out.size() != size_t(kTokens)) continue;
    freq[size_t((out[0] * kVocab + out[1]) * kVocab + out[2])] += 1.0 / N;
  }
  return freq;
}

// Total variation distance, and the threshold a correct sampler exceeds with
// probability <= 1e-6: E[TV] <= ½ Σ sqrt(p_i / N), and TV moves by at most 1/N
// per sample, so P(TV > E[TV] + ε) <= exp(−2Nε²) (McDiarmid).
double tv(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::abs(a[i] - b[i]);
  return s / 2;
}
double tv_threshold(const std::vector<double>& p, int N) {
  double s = 0;
  for (double x : p) s += std::sqrt(x / N);
  return s / 2 + std::sqrt(std::log(1e6) / (2.0 * N));
}

// The marginal of the first two tokens (64 cells: more power per sample).
std::vector<double> first_two(const std::vector<double>& joint) {
  std::vector<double> m(size_t(kVocab * kVocab), 0.0);
  for (size_t i = 0; i < joint.size(); ++i) m[i / kVocab] += joint[i];
  return m;
}

// Whether the empirical distribution passes against p, on the joint and on
// the first-two marginal.
struct Verdict {
  double tv3, tau3, tv2, tau2;
  bool pass() const { return tv3 < tau3 && tv2 < tau2; }
};
Verdict judge(const std::vector<double>& emp, const std::vector<double>& p, int N) {
  return {tv(emp, p), tv_threshold(p, N), tv(first_two(emp), first_two(p)),
          tv_threshold(first_two(p), N)};
}
std::ostream& operator<<(std::ostream& o, const Verdict& v) {
  return o << "TV3 " << v.tv3 << " (threshold " << v.tau3 << "), TV2 " << v.tv2 << " (threshold "
           << v.tau2 << ")";
}

TEST(SamplingDistribution, PlainCoupledAndRejectionAreExactSamples) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = kVocab;
  spec.eos_ids = {};
  Target t = load_target(test::random_hf_checkpoint("dist", spec));
  drafter::Drafter d = random_drafter(t, 2, 3);
  const std::vector<int32_t> prompt = {1, 5};
  const int N = 6000;
  using F = TargetVerifier::Fault;
  for (const SamplerOptions& so : {sampling(1.f, 0, 1.f, 0.f, 0), sampling(0.8f, 5, 0.95f, 0.f, 0)}) {
    SCOPED_TRACE("T " + std::to_string(so.temperature) + " top-k " + std::to_string(so.top_k));
    const std::vector<double> p = exact_joint(*t.model, prompt, so);
    auto verdict = [&](Mode m, int K, F f) {
      Verdict v = judge(empirical(*t.model, d, prompt, so, m, K, N, f), p, N);
      std::cout << "  mode " << int(m) << " K " << K << " fault " << int(f) << ": " << v << "\n";
      return v;
    };
    Verdict v = verdict(Mode::Plain, 0, F::None);
    EXPECT_TRUE(v.pass()) << "plain: " << v;
    for (int K : {1, 2}) {
      v = verdict(Mode::Coupled, K, F::None);
      EXPECT_TRUE(v.pass()) << "coupled K " << K << ": " << v;
      v = verdict(Mode::Rejection, K, F::None);
      EXPECT_TRUE(v.pass()) << "rejection K " << K << ": " << v;
      v = verdict(Mode::RejectionFixedDrafts, K, F::None);
      EXPECT_TRUE(v.pass()) << "rejection, fixed drafts (point masses), K " << K << ": " << v;
    }
    // Broken variants must be caught by the same thresholds.
    v = verdict(Mode::Rejection, 2, F::AcceptWithoutTest);
    EXPECT_FALSE(v.pass()) << "accepting without the p/q test: " << v;
    v = verdict(Mode::Rejection, 2, F::ResampleFromP);
    EXPECT_FALSE(v.pass()) << "resampling from p instead of the residual: " << v;
    v = verdict(Mode::Coupled, 2, F::AcceptSecondChoice);
    EXPECT_FALSE(v.pass()) << "accepting the target's second choice: " << v;
  }
}

}  // namespace
}  // namespace mtp::speculative
