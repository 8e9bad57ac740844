// The KV cache is sized by what a generation needs, never by the model's
// maximum context (docs/SEMANTICS.md, --ctx): a 2^31 − 1 max_position_embeddings
// must not allocate gigabytes for a 5-token generation.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <climits>

#include "checkpoint_util.h"
#include "core/error.h"
#include "model/loader.h"
#include "speculative/scheduler/generate.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

long max_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

TEST(Context, DefaultContextIsWhatTheGenerationNeeds) {
  test::RandomSpec s;
  s.max_position = INT_MAX;  // 2^31 - 1: must not size the KV cache
  std::string dir = test::random_hf_checkpoint("cfg-ctx", s);
  model::Model m(model::load_model(dir, {}));
  const model::ModelConfig& c = m.config();
  EXPECT_EQ(resolve_ctx(c, 0, 5 + 5 + 1), 11);
  EXPECT_EQ(resolve_ctx(c, 64, 11), 64);  // asked explicitly
  // Without a known need: capped by the memory budget, far below the maximum.
  EXPECT_LT(resolve_ctx(c, 0), INT_MAX);
  EXPECT_THROW(resolve_ctx(c, -1), InputError);
  model::ModelConfig small = c;
  small.max_position = 100;
  EXPECT_THROW(resolve_ctx(small, 101), InputError);
  EXPECT_EQ(resolve_ctx(small, 0, 1000), 100);

  // A 5-token generation runs with a small cache.
  GenerateOptions o;
  o.n_new = 5;
  const long before = max_rss_mb();
  GenerateResult r = generate(m, nullptr, {1, 5, 7, 9, 11}, o, nullptr);
  EXPECT_GE(r.token_ids.size(), 1u);
  EXPECT_LE(r.token_ids.size(), 5u);
  EXPECT_LT(max_rss_mb() - before, 512) << "the KV cache grew with max_position_embeddings";
}

}  // namespace
}  // namespace mtp::speculative
