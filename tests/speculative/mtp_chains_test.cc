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

}  // namespace
}  // namespace mtp::speculative
