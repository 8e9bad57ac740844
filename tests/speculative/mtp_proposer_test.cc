// MtpProposer's lazy module catch-up (mtp_proposer.h): modules k >= 1 catch
// up inside their drafting call, or later, batched, while they do not draft.
// Whatever the draft length of each cycle — 0 (no draft), 1 (module 0 only),
// up to K — and however many tokens a cycle commits (also more than the
// modules' 64-row calls hold), every live draft whose earlier drafts were
// accepted equals the drafter's teacher-forced prediction, token and largest
// logit bitwise (invariant 6).
#include <gtest/gtest.h>

#include <random>

#include "drafter/teacher_forced.h"
#include "checkpoint_util.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/cycle/draft_tree.h"
#include "speculative/sources/mtp_proposer.h"
#include "speculative/cycle/target_session.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

struct Drafted {
  int n_committed, k;
  int32_t token;
  float max_logit;
  bool on_path;  // d_0..d_{k-1} were all committed
};

void check_lazy_catch_up(const test::Target& f, const drafter::Drafter& d, unsigned seed) {
  std::mt19937 rng(seed);
  const auto& c = f.model->config();
  const int K = d.config().K;
  constexpr int kLen = 400;
  std::vector<int32_t> committed = test::random_tokens(rng, 5, c.vocab);
  TargetSession target(*f.model, kLen + K + 80, nullptr);
  target.prefill(std::span<const int32_t>(committed).first(committed.size() - 1), nullptr);
  MtpProposer mtp(d, target, 0.f, K);
  DraftTree tree;
  std::vector<Drafted> live;
  int long_jumps = 0, deep_after_pause = 0, paused = 0;
  while (int(committed.size()) < kLen) {
    const int max_k = int(rng() % uint32_t(K + 1));  // 0 .. K drafts this cycle
    const size_t h0 = mtp.history().size();
    mtp.propose(committed, max_k, tree);
    const int N = int(committed.size());
    // Accept a random prefix of the drafts, then one token of "the target's".
    std::vector<int32_t> drafts;
    for (size_t i = h0; i < mtp.history().size(); ++i) drafts.push_back(mtp.history()[i].token);
    const int accept = drafts.empty() ? 0 : int(rng() % (drafts.size() + 1));
    for (size_t i = 0; i < drafts.size(); ++i) {
      const auto& h = mtp.history()[h0 + i];
      live.push_back({h.n_committed, h.k, h.token, h.max_logit, int(i) <= accept});
    }
    if (max_k >= 2 && paused >= 2) ++deep_after_pause;
    paused = max_k <= 1 ? paused + 1 : 0;
    for (int i = 0; i < accept; ++i) committed.push_back(drafts[size_t(i)]);
    // Sometimes a long stretch at once (a prompt, or a long pause): more rows
    // than one module call holds.
    const int extra = rng() % 17 == 0 ? 70 : 1;
    long_jumps += extra > 64;
    for (int i = 0; i < extra; ++i) committed.push_back(int32_t(rng() % uint32_t(c.vocab)));
    target.prefill(std::span<const int32_t>(committed).subspan(size_t(target.forwarded()),
                                                              committed.size() - 1 -
                                                                  size_t(target.forwarded())),
                   nullptr);
    mtp.commit(committed);
    (void)N;
  }
  ASSERT_GT(long_jumps, 0);
  ASSERT_GT(deep_after_pause, 0);
  const drafter::TeacherForced tf = drafter::teacher_forced(*f.model, d, committed, nullptr);
  long checked = 0;
  for (const Drafted& x : live) {
    if (!x.on_path) continue;
    const int t = x.n_committed - 2;
    ASSERT_LT(size_t(t), tf.argmax[size_t(x.k)].size());
    ASSERT_EQ(tf.argmax[size_t(x.k)][size_t(t)], x.token) << "d_" << x.k << " at N=" << x.n_committed;
    ASSERT_EQ(test::float_bits(tf.max_logit[size_t(x.k)][size_t(t)]), test::float_bits(x.max_logit))
        << "d_" << x.k << " at N=" << x.n_committed;
    checked += x.k >= 1;
  }
  EXPECT_GT(checked, 20);
}

TEST(MtpProposer, LazyCatchUpKeepsLiveEqualToTeacherForced) {
  for (model::Arch a : {model::Arch::Llama, model::Arch::Gemma2}) {
    SCOPED_TRACE(model::arch_name(a));
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    spec.vocab = 48;
    if (a == model::Arch::Gemma2) spec.sliding_window = 9;
    const std::string dir = test::random_hf_checkpoint("lazy-catch-up", spec);
    test::Target f = test::load_target(dir);
    drafter::Drafter d = test::random_drafter(f, 3, 7, a == model::Arch::Gemma2 ? 6 : 0);
    check_lazy_catch_up(f, d, 3);
  }
}

}  // namespace
}  // namespace mtp::speculative
