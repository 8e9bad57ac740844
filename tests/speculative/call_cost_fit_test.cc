// Module call costs by rows (call_cost_fit.h): what the union prices a draft
// by before making it. Rows seen are priced from their own bucket; rows not
// seen are priced high rather than low — a call priced too cheap is chosen
// (and lost on), one priced too dear is only chosen later.
#include <gtest/gtest.h>

#include "speculative/policy/call_cost_fit.h"

namespace mtp::speculative {
namespace {

TEST(CallCostByRows, PricesFromTheBucketOfItsRows) {
  CallCostByRows c;
  EXPECT_EQ(c.seconds(5), 0.0) << "nothing seen";
  c.observe(40, 40 * 4e-6);  // a prompt's catch-up: 4 us per row
  c.observe(1, 20e-6);       // a drafting call: 20 us
  EXPECT_DOUBLE_EQ(c.seconds(1), 20e-6);
  EXPECT_DOUBLE_EQ(c.seconds(50), 50 * 4e-6);
  c.observe(1, 30e-6);  // follows the calls seen, a fifth of the way
  EXPECT_NEAR(c.seconds(1), 22e-6, 1e-12);
}

TEST(CallCostByRows, RowsNotSeenArePricedHighNotLow) {
  CallCostByRows c;
  c.observe(40, 40 * 4e-6);  // bucket 32..63 only
  // Fewer rows: at most the smallest call of the bucket above (32 rows), not
  // 4 us per row (a 1-row call costs ~5x that on a compute-bound drafter).
  EXPECT_DOUBLE_EQ(c.seconds(1), 32 * 4e-6);
  EXPECT_DOUBLE_EQ(c.seconds(3), 32 * 4e-6);
  c.observe(2, 2 * 10e-6);  // bucket 2..3: 10 us per row
  // More rows than any bucket seen below them: that bucket's per-row cost
  // (a row costs at most what it costs in a smaller call).
  EXPECT_DOUBLE_EQ(c.seconds(6), 6 * 10e-6);
  EXPECT_DOUBLE_EQ(c.seconds(40), 40 * 4e-6);
  EXPECT_DOUBLE_EQ(c.seconds(200), 200 * 4e-6);
  EXPECT_EQ(c.seconds(0), 0.0);
}

}  // namespace
}  // namespace mtp::speculative
