// Draft-tree rows (model/kv_cache.h "Tree rows") as a property test: a forward
// of a root and a random tree of up to 16 nodes gives, for every node, the bits
// (logits and capture hidden) of decoding that node's path one token at a time
// — so a row's output does not depend on its siblings or cousins — for every
// family (Gemma's sliding window shorter than the sequences and than some
// paths, and trees placed after the window's ring has wrapped), fp32 and bf16, 1 and 2 threads, every SIMD target the host runs.
// After commit_tree of a random path, decoding on gives the sequential bits.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "bit_exact.h"
#include "checkpoint_util.h"
#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

struct Tree {
  std::vector<int32_t> token, parent;
  std::vector<int32_t> path(int node) const {  // root's child down to node
    std::vector<int32_t> p;
    for (int n = node; n >= 0; n = parent[size_t(n)]) p.insert(p.begin(), n);
    return p;
  }
};

Tree random_tree(std::mt19937& rng, int vocab) {
  std::uniform_int_distribution<int> size(1, 16);
  Tree t;
  const int n = size(rng);
  for (int i = 0; i < n; ++i) {
    // Deep chains and wide levels both occur: parent among the last few nodes
    // or -1; duplicate sibling tokens occur too (small token range).
    std::uniform_int_distribution<int> par(std::max(-1, i - 4), i - 1);
    t.parent.push_back(i == 0 ? -1 : par(rng));
    t.token.push_back(std::uniform_int_distribution<int>(3, std::min(vocab - 1, 12))(rng));
  }
  return t;
}

// Rows of one decode step's outputs.
struct Out {
  std::vector<float> logits, hidden;
};

Out decode_one(const model::Model& m, model::KVCache& kv, int32_t tok, ThreadPool* p) {
  Out o{std::vector<float>(size_t(m.config().vocab)), std::vector<float>(size_t(m.config().d_model))};
  model::Row row{0, kv.length(0), tok};
  m.forward({&row, 1}, kv, {o.logits.data(), nullptr, o.hidden.data()}, p);
  return o;
}

bool same_bits(const float* a, const float* b, size_t n) {
  return first_bit_difference(std::vector<float>(a, a + n), std::vector<float>(b, b + n)) == -1;
}

void check_tree_rows(const model::Model& m, int threads, unsigned seed) {
  const auto& c = m.config();
  const size_t V = size_t(c.vocab), d = size_t(c.d_model);
  ThreadPool pool(threads);
  ThreadPool* p = threads > 1 ? &pool : nullptr;
  std::mt19937 rng(seed);
  const int ctx = 80, q_max = 32;
  // A sliding-window model keeps a ring of window + q_max slots (kv_cache.h):
  // its last two trials start the tree past the ring's first lap, so the
  // tree's keys sit beside slots that were overwritten.
  const int ring = c.sliding_window > 0 ? c.sliding_window + q_max : 0;
  const int trials = ring > 0 ? 8 : 6;
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    const int P = trial < 6 ? std::uniform_int_distribution<int>(1, 14)(rng)
                            : std::uniform_int_distribution<int>(ring + 1, ctx - 20)(rng);
    const auto prefix = random_tokens(rng, P, c.vocab);
    const int32_t root = random_tokens(rng, 1, c.vocab)[0];
    const Tree tree = random_tree(rng, c.vocab);
    const size_t n = tree.token.size();

    // The tree call: sequence 0 = prefix, then root + tree; sequence 1 gets an
    // ordinary row in the same call (trees share calls with other sequences).
    auto kv = m.make_cache(2, ctx, q_max);
    run_chunks(m, kv, 0, prefix, {5}, p);
    std::vector<model::Row> rows = {{1, 0, prefix[0]}, {0, P, root}};
    std::vector<int32_t> pos(n);
    for (size_t i = 0; i < n; ++i) {
      const int32_t par = tree.parent[i];
      pos[i] = (par < 0 ? P : pos[size_t(par)]) + 1;
      rows.push_back({0, pos[i], tree.token[i], int32_t(i), par});
    }
    std::vector<float> lg(rows.size() * V), hd(rows.size() * d);
    m.forward(rows, kv, {lg.data(), nullptr, hd.data()}, p);
    ASSERT_EQ(kv.length(0), P + 1);
    ASSERT_EQ(kv.tree_size(0), int(n));

    // Each node against decoding prefix, root, its path.
    for (size_t i = 0; i < n; ++i) {
      auto ref = m.make_cache(1, ctx, 32);
      run_chunks(m, ref, 0, prefix, {1}, p);
      Out o = decode_one(m, ref, root, p);
      if (i == 0) {
        ASSERT_TRUE(same_bits(o.logits.data(), lg.data() + 1 * V, V)) << "root logits";
        ASSERT_TRUE(same_bits(o.hidden.data(), hd.data() + 1 * d, d)) << "root hidden";
      }
      for (int32_t node : tree.path(int(i))) o = decode_one(m, ref, tree.token[size_t(node)], p);
      ASSERT_TRUE(same_bits(o.logits.data(), lg.data() + (i + 2) * V, V)) << "logits of node " << i;
      ASSERT_TRUE(same_bits(o.hidden.data(), hd.data() + (i + 2) * d, d)) << "hidden of node " << i;
    }

    // Commit the path to a random node, then decode on: the sequential bits.
    const int target = std::uniform_int_distribution<int>(0, int(n) - 1)(rng);
    const auto path = tree.path(target);
    kv.commit_tree(0, path);
    ASSERT_EQ(kv.length(0), P + 1 + int(path.size()));
    ASSERT_EQ(kv.tree_size(0), 0);
    auto ref = m.make_cache(1, ctx, 32);
    run_chunks(m, ref, 0, prefix, {1}, p);
    decode_one(m, ref, root, p);
    for (int32_t node : path) decode_one(m, ref, tree.token[size_t(node)], p);
    for (const int32_t t : random_tokens(rng, 8, c.vocab)) {
      Out a = decode_one(m, kv, t, p), b = decode_one(m, ref, t, p);
      ASSERT_TRUE(same_bits(a.logits.data(), b.logits.data(), V)) << "after commit";
      ASSERT_TRUE(same_bits(a.hidden.data(), b.hidden.data(), d)) << "after commit";
    }
  }
}

class TreeRows : public SimdTargetTest {};
INSTANTIATE_TEST_SUITE_P(Simd, TreeRows, ::testing::ValuesIn(kernels::available_simd_targets()),
                         [](const auto& info) { return info.param; });

TEST_P(TreeRows, EveryNodeEqualsDecodingItsPath) {
  for (model::Arch a : test::every_arch()) {
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    if (spec.sliding_window > 0) spec.sliding_window = 6;
    const std::string dir = test::random_hf_checkpoint("tree-rows", spec);
    for (auto wt : {kernels::WeightType::F32, kernels::WeightType::BF16}) {
      model::LoadOptions o;
      o.weights = wt;
      model::Model m(model::load_model(dir, o));
      if (!m.verifies_trees()) {  // recurrent layers (Qwen3.5): tree rows are refused
        auto kv = m.make_cache(1, 16, 8);
        const std::vector<model::Row> rows = {{0, 0, 5}, {0, 1, 6, 0, -1}};
        expect_error<mtp::InputError>([&] { m.forward(rows, kv, {}, nullptr); },
                                      {"tree row", "recurrent", "cannot verify draft trees"});
        EXPECT_EQ(kv.length(0), 0);
        continue;
      }
      for (int threads : {1, 2}) {
        SCOPED_TRACE(testing::Message() << model::arch_name(a) << " "
                                        << kernels::weight_type_name(wt) << " threads=" << threads);
        check_tree_rows(m, threads, 97 * threads + 13 * int(a) + int(wt));
      }
    }
  }
}

// Malformed tree rows are refused before the cache changes.
TEST(TreeRowsInput, MalformedTreesAreRefused) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  model::Model m(model::load_model(test::random_hf_checkpoint("tree-rows-bad", spec), {}));
  auto kv = m.make_cache(1, 32, 8);
  std::vector<model::Row> prefix = {{0, 0, 5}, {0, 1, 6}};
  m.forward(prefix, kv, {}, nullptr);
  auto refused = [&](std::vector<model::Row> rows, const char* what) {
    expect_error<mtp::InputError>([&] { m.forward(rows, kv, {}, nullptr); }, {what});
    EXPECT_EQ(kv.length(0), 2);
  };
  refused({{0, 2, 7, 0, -1}, {0, 4, 7, 1, 0}}, "parent's position + 1 is 3");
  refused({{0, 2, 7, 0, -1}, {0, 3, 7, 1, 1}}, "a parent is -1 or an earlier node");
  refused({{0, 2, 7, 1, -1}}, "node 1 where node 0 comes next");
  refused({{0, 2, 7, 0, -1}, {0, 2, 8}}, "ordinary rows must come before");
  std::vector<model::Row> many;
  for (int i = 0; i < 9; ++i) many.push_back({0, 2, 7, i, -1});
  refused(many, "more than 8 rows");
  // A cache made without tree slots refuses tree rows.
  auto chains_only = model::KVCache(m.config(), 1, 32, 8, 0);
  m.forward(prefix, chains_only, {}, nullptr);
  std::vector<model::Row> one = {{0, 2, 7, 0, -1}};
  expect_error<mtp::InputError>([&] { m.forward(one, chains_only, {}, nullptr); },
                                {"holds 0 tree rows"});
  // A path that does not continue from the root is refused by commit_tree.
  std::vector<model::Row> ok = {{0, 2, 7, 0, -1}, {0, 2, 8, 1, -1}, {0, 3, 9, 2, 1}};
  m.forward(ok, kv, {}, nullptr);
  std::vector<int32_t> bad = {0, 2};
  expect_error<mtp::InputError>([&] { kv.commit_tree(0, bad); }, {"does not continue the path"});
  EXPECT_EQ(kv.length(0), 2);
  std::vector<int32_t> good = {1, 2};
  kv.commit_tree(0, good);
  EXPECT_EQ(kv.length(0), 4);
}

}  // namespace
}  // namespace mtp::test
