// prefill_timed (forward_timing.h): the gate's verify costs timed on the
// prompt's own last rows must leave the session exactly as one prefill would —
// cache, capture hidden and the last row's logits bitwise — for every chunk
// size and prompt length (also prompts longer than one forward call and ones
// too short to time, which fall back to a plain prefill).
#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "model_util.h"
#include "spec_fixture.h"
#include "speculative/policy/forward_timing.h"
#include "speculative/cycle/target_session.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

std::vector<uint32_t> bits(const float* p, size_t n) {
  std::vector<uint32_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = test::float_bits(p[i]);
  return b;
}

TEST(ForwardTiming, TimedPrefillEqualsPlainPrefillBitwise) {
  for (model::Arch arch : {model::Arch::Llama, model::Arch::Gemma2}) {
    test::RandomSpec spec = test::RandomSpec::for_arch(arch);
    const test::Target f = test::load_target(test::random_hf_checkpoint("fwd-timing", spec));
    const auto& c = f.model->config();
    const size_t V = c.vocab, d = c.d_model;
    std::mt19937 rng(5);
    int timed = 0, fallback = 0;
    for (int q_max : {1, 2, 3, 6}) {
      for (int len : {q_max + 3, q_max + 4, 23, 100}) {
        SCOPED_TRACE(testing::Message() << "arch " << int(arch) << " q_max " << q_max << " prompt "
                                        << len);
        const std::vector<int32_t> prompt = test::random_tokens(rng, len, int(c.vocab));
        const int ctx = len + 8;
        TargetSession a(*f.model, ctx, nullptr), b(*f.model, ctx, nullptr);
        std::vector<float> la(V), lb(V, -1.f);
        a.prefill(prompt, la.data());
        const std::vector<double> t = prefill_timed(b, prompt, q_max, lb.data());
        ASSERT_EQ(b.forwarded(), len);
        EXPECT_EQ(bits(la.data(), V), bits(lb.data(), V)) << "last prompt row's logits";
        for (int p = 0; p < len; ++p) {
          ASSERT_EQ(bits(a.hidden_row(p), d), bits(b.hidden_row(p), d)) << "capture at " << p;
        }
        // The caches: the next forward reads every key and value.
        const std::vector<int32_t> next = test::random_tokens(rng, 3, int(c.vocab));
        std::vector<float> na(3 * V), nb(3 * V);
        a.forward(next, na.data());
        b.forward(next, nb.data());
        EXPECT_EQ(bits(na.data(), na.size()), bits(nb.data(), nb.size())) << "after the prompt";
        if (len < q_max + 4) {
          EXPECT_TRUE(t.empty()) << "too short to time: the caller times dummy rows";
          ++fallback;
          continue;
        }
        ++timed;
        ASSERT_EQ(t.size(), size_t(q_max));
        EXPECT_GT(t[0], 0.0);
        for (int q = 1; q < q_max; ++q) EXPECT_GE(t[size_t(q)], t[size_t(q - 1)]);
      }
    }
    EXPECT_GT(timed, 0);
    EXPECT_GT(fallback, 0);
  }
}

}  // namespace
}  // namespace mtp::speculative
