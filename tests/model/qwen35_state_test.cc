// Exactness with recurrent state (Qwen3.5's Gated DeltaNet layers,
// model/kv_cache.h "Recurrent layers"): a verify call of k + 1 rows leaves the
// logits AND the state bits of k + 1 one-token decodes, with rows of several
// sequences in one call, on 1 or 2 threads and every SIMD target; a rejection (truncate inside
// the last call) followed by the true tokens is bit for bit the run that never
// drafted; a planted off-by-one in the replayed rows must be caught; a
// rollback behind the last call is an internal error, not a wrong state.
#include <gtest/gtest.h>

#include <random>

#include "bit_exact.h"
#include "checkpoint_util.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

using model::Row;

model::Model q35_model(kernels::WeightType wt = kernels::WeightType::F32) {
  RandomSpec s = RandomSpec::for_arch(model::Arch::Qwen35);
  s.n_layers = 5;  // recurrent layers on both sides of the full one
  s.layer_types = {"linear_attention", "linear_attention", "linear_attention", "full_attention",
                   "linear_attention"};
  s.dtype = DType::BF16;
  model::LoadOptions o;
  o.weights = wt;
  return model::Model(model::load_model(random_hf_checkpoint("q35-state", s), o));
}

// Every recurrent layer's state of a sequence, concatenated.
std::vector<float> states(model::KVCache& kv, const model::ModelConfig& c, int seq) {
  std::vector<float> out;
  for (int l = 0; l < c.n_layers; ++l) {
    if (!c.is_recurrent(l)) continue;
    const float* s = kv.rec_state(seq, l);
    out.insert(out.end(), s, s + c.linear.state_floats());
  }
  return out;
}

// One call of rows; returns their logits [rows, vocab].
std::vector<float> call(const model::Model& m, model::KVCache& kv, const std::vector<Row>& rows,
                        ThreadPool* pool) {
  std::vector<float> logits(rows.size() * size_t(m.config().vocab));
  m.forward(rows, kv, {logits.data(), nullptr, nullptr}, pool);
  return logits;
}

// tokens[from, to) of sequence seq as rows at their positions.
std::vector<Row> rows_of(int seq, const std::vector<int32_t>& tokens, int from, int to) {
  std::vector<Row> rows;
  for (int p = from; p < to; ++p) rows.push_back({seq, p, tokens[size_t(p)]});
  return rows;
}

// On every SIMD target the host executes (the kernels pinned to it).
class Qwen35StateSimd : public SimdTargetTest {};
INSTANTIATE_TEST_SUITE_P(Simd, Qwen35StateSimd,
                         ::testing::ValuesIn(kernels::available_simd_targets()),
                         [](const auto& info) { return info.param; });

TEST_P(Qwen35StateSimd, VerifyOfKPlusOneRowsEqualsKPlusOneDecodes) {
  for (auto wt : {kernels::WeightType::F32, kernels::WeightType::Q8_0}) {
    const model::Model m = q35_model(wt);
    const auto& c = m.config();
    const size_t V = size_t(c.vocab);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(testing::Message() << kernels::weight_type_name(wt) << " threads=" << threads);
      ThreadPool pool(threads);
      std::mt19937 rng(uint32_t(7 + threads));
      std::vector<std::vector<int32_t>> toks = {random_tokens(rng, 16, c.vocab),
                                                random_tokens(rng, 16, c.vocab)};
      const int P = 9, k1 = 6;  // prefix, then k + 1 rows
      model::KVCache dec = m.make_cache(2, 32, 16), ver = m.make_cache(2, 32, 16);
      for (int s = 0; s < 2; ++s) {
        call(m, dec, rows_of(s, toks[s], 0, P), &pool);
        call(m, ver, rows_of(s, toks[s], 0, P), &pool);
      }
      // Decodes: one row per call. Verify: both sequences' k + 1 rows in one
      // call, interleaved.
      std::vector<std::vector<float>> want(2);
      for (int s = 0; s < 2; ++s) {
        for (int p = P; p < P + k1; ++p) {
          const auto l = call(m, dec, rows_of(s, toks[s], p, p + 1), &pool);
          want[s].insert(want[s].end(), l.begin(), l.end());
        }
      }
      std::vector<Row> rows;
      for (int p = P; p < P + k1; ++p) {
        for (int s = 0; s < 2; ++s) rows.push_back({s, p, toks[s][size_t(p)]});
      }
      const auto got = call(m, ver, rows, &pool);
      for (int s = 0; s < 2; ++s) {
        SCOPED_TRACE(testing::Message() << "sequence " << s);
        std::vector<float> mine;
        for (int j = 0; j < k1; ++j) {
          const auto at = got.begin() + long((size_t(j) * 2 + size_t(s)) * V);
          mine.insert(mine.end(), at, at + long(V));
        }
        EXPECT_EQ(first_bit_difference(mine, want[s]), -1) << "logits";
        EXPECT_EQ(first_bit_difference(states(ver, c, s), states(dec, c, s)), -1) << "state";
      }
    }
  }
}

// A run's logits after its rollback point and the state it leaves.
struct Rejected {
  std::vector<float> logits, state;
};
// Sequence 0's tokens from position `from` on, in calls of 3 rows: their
// logits and the state left.
Rejected continue_in_threes(const model::Model& m, model::KVCache& kv,
                            const std::vector<int32_t>& toks, int from, ThreadPool* pool) {
  Rejected r;
  for (int p = from; p < int(toks.size()); p += 3) {
    const auto l = call(m, kv, rows_of(0, toks, p, std::min(p + 3, int(toks.size()))), pool);
    r.logits.insert(r.logits.end(), l.begin(), l.end());
  }
  r.state = states(kv, m.config(), 0);
  return r;
}

// Prefill P tokens, verify [t_P, drafts...] whose first `accept` drafts are
// the true tokens and the rest wrong, keep P + 1 + accept positions, then run
// the true tokens on. `fault`: the replay's planted off-by-one.
Rejected reject_then_continue(const model::Model& m, const std::vector<int32_t>& toks, int P,
                              int k, int accept, int fault, ThreadPool* pool) {
  model::KVCache kv = m.make_cache(2, 40, 16);
  call(m, kv, rows_of(1, toks, 0, 4), pool);  // another sequence's rows beside ours
  call(m, kv, rows_of(0, toks, 0, P), pool);
  std::vector<Row> rows = {{0, P, toks[size_t(P)]}, {1, 4, toks[4]}};
  for (int j = 1; j <= k; ++j) {
    int32_t t = toks[size_t(P + j)];
    if (j > accept) t = t == 3 ? 4 : 3;  // a wrong draft
    rows.push_back({0, P + j, t});
  }
  call(m, kv, rows, pool);
  kv.inject_replay_fault(fault);
  kv.truncate(0, P + 1 + accept);
  kv.inject_replay_fault(0);
  return continue_in_threes(m, kv, toks, P + 1 + accept, pool);
}

// The same tokens, never drafted: prefix, then the rest in calls of 3 rows
// from the same position on.
Rejected never_drafted(const model::Model& m, const std::vector<int32_t>& toks, int from,
                       ThreadPool* pool) {
  model::KVCache kv = m.make_cache(1, 40, 16);
  call(m, kv, rows_of(0, toks, 0, from), pool);
  return continue_in_threes(m, kv, toks, from, pool);
}

TEST_P(Qwen35StateSimd, RejectThenContinueEqualsNeverHavingDrafted) {
  const model::Model m = q35_model();
  std::mt19937 rng(21);
  const std::vector<int32_t> toks = random_tokens(rng, 24, m.config().vocab);
  const int P = 8, k = 5;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int accept = 0; accept <= k; ++accept) {
      SCOPED_TRACE(testing::Message() << "threads " << threads << ", accepted " << accept);
      const Rejected got = reject_then_continue(m, toks, P, k, accept, 0, &pool);
      const Rejected want = never_drafted(m, toks, P + 1 + accept, &pool);
      EXPECT_EQ(first_bit_difference(got.logits, want.logits), -1) << "logits";
      EXPECT_EQ(first_bit_difference(got.state, want.state), -1) << "state";
    }
  }
}

// The check above must be able to fail: a replay of one row too many or too
// few leaves another state, and the next logits differ.
TEST(Qwen35State, PlantedOffByOneInTheSnapshotIndexIsCaught) {
  const model::Model m = q35_model();
  std::mt19937 rng(22);
  const std::vector<int32_t> toks = random_tokens(rng, 24, m.config().vocab);
  const int P = 8, k = 5, accept = 2;
  const Rejected want = never_drafted(m, toks, P + 1 + accept, nullptr);
  for (int fault : {-1, 1}) {
    SCOPED_TRACE(testing::Message() << "replay fault " << fault);
    const Rejected got = reject_then_continue(m, toks, P, k, accept, fault, nullptr);
    EXPECT_NE(first_bit_difference(got.state, want.state), -1) << "a wrong state went unseen";
    EXPECT_NE(first_bit_difference(got.logits, want.logits), -1) << "wrong logits went unseen";
  }
}

// A rollback behind the start of the sequence's last call needs a state
// nobody kept: an internal error naming it, never a silently wrong state. A
// rollback to 0 (a freed slot) resets the state.
TEST(Qwen35State, RollbackBehindTheLastCallIsRefusedAndToZeroResets) {
  const model::Model m = q35_model();
  std::mt19937 rng(23);
  const std::vector<int32_t> toks = random_tokens(rng, 12, m.config().vocab);
  model::KVCache kv = m.make_cache(1, 16, 8);
  call(m, kv, rows_of(0, toks, 0, 5), nullptr);
  call(m, kv, rows_of(0, toks, 5, 9), nullptr);
  expect_error<InternalError>([&] { kv.truncate(0, 4); }, {"recurrent state", "position 5"});
  EXPECT_EQ(kv.length(0), 9);
  kv.truncate(0, 0);
  for (float x : states(kv, m.config(), 0)) ASSERT_EQ(x, 0.0f);
  const Rejected fresh = never_drafted(m, toks, 0, nullptr);
  std::vector<float> again;
  for (int p = 0; p < 12; p += 3) {
    const auto l = call(m, kv, rows_of(0, toks, p, p + 3), nullptr);
    again.insert(again.end(), l.begin(), l.end());
  }
  EXPECT_EQ(first_bit_difference(again, fresh.logits), -1);
}

}  // namespace
}  // namespace mtp::test
