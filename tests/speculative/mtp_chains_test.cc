// MtpChains (mtp_chains.h): several sequences drafting in shared module calls
// get bitwise the drafts each gets alone. Sequences of different lengths,
// draft lengths 0..K chosen per cycle and per sequence (some sit a cycle out,
// so their modules lag behind), catch-ups longer than one 64-row call, greedy
// and seeded coupled sampling; each sequence alone is an MtpSource of its own
// (one slot, driven through SourceProposer, catching up lazily in its
// proposes), so the two sides also split the same rows into different calls.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "checkpoint_util.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/sources/mtp_chains.h"
#include "speculative/sources/mtp_source.h"
#include "speculative/cycle/target_session.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

struct One {
  std::vector<int32_t> committed;
  std::unique_ptr<TargetSession> target;
  std::unique_ptr<MtpSource> source;
  std::unique_ptr<SourceProposer> alone;
  SamplerOptions so;
  std::unique_ptr<Sampler> sampler;  // the batched side's
  DraftTree tree;
  std::vector<MtpDraft> history;
};

void check_batched_equals_alone(const test::Target& f, const drafter::Drafter& d, unsigned seed) {
  std::mt19937 rng(seed);
  const auto& c = f.model->config();
  const int K = d.config().K;
  constexpr int kSeqs = 3, kLen = 300;
  const int ctx = kLen + K + 80;
  MtpChains chains(*f.model, d, kSeqs, ctx);
  std::vector<One> seqs(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    One& s = seqs[size_t(i)];
    s.committed = test::random_tokens(rng, 2 + 9 * i, c.vocab);
    if (i == 1) s.so.temperature = 0.8f, s.so.seed = 11;  // coupled sampling
    s.target = std::make_unique<TargetSession>(*f.model, ctx, nullptr);
    s.target->prefill(std::span<const int32_t>(s.committed).first(s.committed.size() - 1),
                      nullptr);
    s.source = std::make_unique<MtpSource>(*f.model, d, 1, ctx, i == 2 ? K - 1 : K);
    s.alone = std::make_unique<SourceProposer>(*s.source, *s.target, s.so);
    s.sampler = std::make_unique<Sampler>(s.so);
  }
  long compared = 0, shared_calls = 0, deep = 0, long_jumps = 0;
  for (int cycle = 0; cycle < 400; ++cycle) {
    std::vector<MtpChains::Job> jobs;
    std::vector<int> who;
    for (int i = 0; i < kSeqs; ++i) {
      One& s = seqs[size_t(i)];
      if (int(s.committed.size()) >= kLen || rng() % 4 == 0) continue;  // sits this cycle out
      MtpChains::Job j;
      j.slot = i;
      j.committed = s.committed;
      j.target = s.target.get();
      j.modules = i == 2 ? K - 1 : K;
      j.max_k = 1 + int(rng() % uint32_t(K));
      j.sampler = s.sampler.get();
      j.tree = &s.tree;
      j.history = &s.history;
      jobs.push_back(j);
      who.push_back(i);
    }
    if (jobs.empty()) {
      bool all_done = true;
      for (const One& s : seqs) all_done = all_done && int(s.committed.size()) >= kLen;
      if (all_done) break;
      continue;
    }
    shared_calls += jobs.size() > 1;
    chains.draft(jobs);
    for (size_t x = 0; x < jobs.size(); ++x) {
      One& s = seqs[size_t(who[x])];
      SCOPED_TRACE("sequence " + std::to_string(who[x]) + " at N = " +
                   std::to_string(s.committed.size()));
      DraftTree alone;
      s.alone->propose(s.committed, jobs[x].max_k, alone);
      ASSERT_EQ(s.tree.token, alone.token);
      ASSERT_EQ(s.tree.parent, alone.parent);
      ASSERT_EQ(s.alone->last_scores().size(), s.tree.size());
      for (size_t n = 0; n < s.tree.size(); ++n) {
        const MtpDraft& b = s.history[s.history.size() - s.tree.size() + n];
        ASSERT_EQ(int(n), b.k);
        ASSERT_EQ(test::float_bits(s.alone->last_scores()[n]), test::float_bits(b.max_logit))
            << "module " << b.k;
        ++compared;
        deep += b.k >= 2;
      }
      // Commit a random prefix of the drafts and one (or, sometimes, 70)
      // further tokens; the target forwards them.
      const int accept = int(rng() % (s.tree.size() + 1));
      for (int n = 0; n < accept; ++n) s.committed.push_back(s.tree.token[size_t(n)]);
      const int extra = rng() % 13 == 0 ? 70 : 1;
      long_jumps += extra > 64;
      for (int n = 0; n < extra; ++n) s.committed.push_back(int32_t(rng() % uint32_t(c.vocab)));
      const size_t done = size_t(s.target->forwarded());
      s.target->prefill(std::span<const int32_t>(s.committed).subspan(
                            done, s.committed.size() - 1 - done),
                        nullptr);
      s.alone->commit(s.committed);
    }
  }
  EXPECT_GT(shared_calls, 20);
  EXPECT_GT(deep, 20);
  EXPECT_GT(long_jumps, 0);
  EXPECT_GT(compared, 100);
  // A released slot starts again from nothing.
  chains.release(0);
  EXPECT_EQ(chains.runner().kv(0).length(0), 0);
  EXPECT_EQ(chains.d0_row(0), -1);
}

TEST(MtpChains, SharedModuleCallsDraftWhatEachSequenceDraftsAlone) {
  for (model::Arch a : {model::Arch::Llama, model::Arch::Gemma2}) {
    SCOPED_TRACE(model::arch_name(a));
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    spec.vocab = 48;
    if (a == model::Arch::Gemma2) spec.sliding_window = 9;
    const std::string dir = test::random_hf_checkpoint("mtp-chains", spec);
    test::Target f = test::load_target(dir);
    drafter::Drafter d = test::random_drafter(f, 3, 7, a == model::Arch::Gemma2 ? 6 : 0);
    check_batched_equals_alone(f, d, 5);
  }
}

// MtpChains::draft_calls, what the union prices a draft by before making it,
// names the calls draft() then makes — module, rows — whether the modules are
// up to date, lag by a few rows (cycles without a draft) or by more than one
// 64-row call.
TEST(MtpChains, DraftCallsAreTheCallsADraftMakes) {
  std::mt19937 rng(3);
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 48;
  test::Target f = test::load_target(test::random_hf_checkpoint("mtp-chains-calls", spec));
  const drafter::Drafter d = test::random_drafter(f, 3, 7, 0);
  const int K = d.config().K, ctx = 1000;
  MtpChains chains(*f.model, d, 1, ctx);
  std::vector<std::pair<int, int>> made;
  chains.on_call = [&](int k, int rows, double) { made.push_back({k, rows}); };
  std::vector<int32_t> committed = test::random_tokens(rng, 5, spec.vocab);
  TargetSession target(*f.model, ctx, nullptr);
  target.prefill(std::span<const int32_t>(committed).first(committed.size() - 1), nullptr);
  Sampler sampler(SamplerOptions{});
  DraftTree tree;
  long drafts = 0, multi_call = 0;
  while (int(committed.size()) < ctx - 80) {
    const int N = int(committed.size());
    if (rng() % 3 != 0) {
      MtpChains::Job j;
      j.committed = committed;
      j.target = &target;
      j.max_k = 1 + int(rng() % uint32_t(K));
      j.sampler = &sampler;
      j.tree = &tree;
      std::vector<std::pair<int, int>> expected;
      chains.draft_calls(0, N, j.max_k, expected);
      made.clear();
      chains.draft({&j, 1});
      ASSERT_EQ(made, expected) << "N = " << N << ", max_k = " << j.max_k;
      ++drafts;
      for (size_t i = 1; i < made.size(); ++i) multi_call += made[i].first == made[i - 1].first;
    }
    const int extra = rng() % 9 == 0 ? 70 : 1 + int(rng() % 3);
    for (int n = 0; n < extra; ++n) committed.push_back(int32_t(rng() % uint32_t(spec.vocab)));
    const size_t done = size_t(target.forwarded());
    target.prefill(std::span<const int32_t>(committed).subspan(done, committed.size() - 1 - done),
                   nullptr);
  }
  EXPECT_GT(drafts, 40);
  EXPECT_GT(multi_call, 0) << "no catch-up longer than one call";
}

TEST(MtpChains, ASlotNamedTwiceIsRefused) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 48;
  test::Target f = test::load_target(test::random_hf_checkpoint("mtp-chains-twice", spec));
  drafter::Drafter d = test::random_drafter(f, 2, 7, 0);
  MtpChains chains(*f.model, d, 2, 32);
  std::vector<int32_t> tok = {1, 2, 3, 4};
  TargetSession target(*f.model, 32, nullptr);
  target.prefill(std::span<const int32_t>(tok).first(3), nullptr);
  Sampler sampler(SamplerOptions{});
  DraftTree t0, t1;
  std::vector<MtpChains::Job> jobs(2);
  for (int i = 0; i < 2; ++i) {
    jobs[size_t(i)].slot = 1;
    jobs[size_t(i)].committed = tok;
    jobs[size_t(i)].target = &target;
    jobs[size_t(i)].max_k = 2;
    jobs[size_t(i)].sampler = &sampler;
    jobs[size_t(i)].tree = i == 0 ? &t0 : &t1;
  }
  EXPECT_ANY_THROW(chains.draft(jobs));
  jobs.resize(1);
  chains.draft(jobs);
  EXPECT_EQ(t0.size(), 2u);
}

}  // namespace
}  // namespace mtp::speculative
