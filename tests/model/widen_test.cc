// Function-preserving widening (model/widen.h, docs/WIDEN.md):
// - the kernel facts the construction rests on: zero terms appended to a
//   matmul row (any x, including -0 and exact cancellations) and RMSNorm over
//   4^k·d dims with w·2^-k, eps·4^-k give the same bits;
// - random checkpoints of every family: widened logits and greedy ids equal
//   the original's (bitwise for Llama/Qwen, within a bound for Gemma's 1 + w
//   norms), for fp32 and bf16 matrices compared with the same --weights;
// - stories260K: the widening itself is bitwise (widened == converted at the
//   source shape), the llama2.c -> rotate-half conversion within rounding,
//   greedy ids equal;
// - bad shapes are ShapeErrors naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "model/widen.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::model {
namespace {

using kernels::PackedMatrix;
using kernels::WeightType;

// Widens the model at `src` into a fresh folder; returns the folder.
std::string widen_to(const std::string& src, const std::string& shape, DType dtype,
                     bool allow_inexact = false) {
  LoadedModel lm = load_model(src, {});
  WidenPlan p = plan_widen(lm.config, parse_widen_shape(shape, lm.config), allow_inexact);
  std::string dir = test::temp_dir("widen");
  write_widened(lm, p, dtype, lm.tokenizer, dir);
  return dir;
}

struct Outputs {
  ModelConfig config;
  test::RowOutputs rows;
};

Outputs forward_all(const std::string& path, WeightType wt, const std::vector<int32_t>& toks) {
  LoadOptions o;
  o.weights = wt;
  Model m(load_model(path, o));
  KVCache kv = m.make_cache(1, int(toks.size()) + 1);
  Outputs out{m.config(), test::run_chunks(m, kv, 0, toks, {3, 1, 5}, nullptr)};
  return out;
}

std::vector<int32_t> greedy(const Model& m, std::vector<int32_t> prompt, int n) {
  KVCache kv = m.make_cache(1, int(prompt.size()) + n + 1);
  const int V = m.config().vocab;
  std::vector<float> logits(prompt.size() * size_t(V));
  std::vector<Row> rows;
  for (size_t i = 0; i < prompt.size(); ++i) rows.push_back({0, int(i), prompt[i]});
  m.forward(rows, kv, {logits.data()}, nullptr);
  std::vector<int32_t> out;
  const float* last = logits.data() + (prompt.size() - 1) * size_t(V);
  for (int t = 0; t < n; ++t) {
    int32_t id = int32_t(std::max_element(last, last + V) - last);
    out.push_back(id);
    Row r{0, int(prompt.size()) + t, id};
    m.forward({&r, 1}, kv, {logits.data()}, nullptr);
    last = logits.data();
  }
  return out;
}

// Max |a - b| over the first `d` of every `stride` values.
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// The first d of each row of width `w`.
std::vector<float> first_cols(const std::vector<float>& x, size_t w, size_t d) {
  std::vector<float> out;
  for (size_t r = 0; r < x.size() / w; ++r) out.insert(out.end(), x.begin() + r * w, x.begin() + r * w + d);
  return out;
}

TEST(Widen, ZeroColumnsAppendedToAMatmulRowAreBitwiseNoOps) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  for (WeightType wt : {WeightType::F32, WeightType::BF16}) {
    for (size_t cols : {5, 16, 33, 64}) {
      for (size_t extra : {1, 15, 16, 100}) {
        const size_t rows = 9, c2 = cols + extra, q = 3;
        std::vector<float> w(rows * cols), w2(rows * c2, 0.f), x(q * cols), x2(q * c2);
        for (auto& v : w) v = round_bf16(n(rng));
        for (size_t r = 0; r < rows; ++r) std::copy_n(&w[r * cols], cols, &w2[r * c2]);
        // Row 0 cancels exactly to +0 (x = ±a against w = 1); row 1 is all zeros.
        for (size_t i = 0; i < cols; ++i) w[i] = w2[i] = 1.f;
        for (size_t i = 0; i < cols; ++i) w[cols + i] = w2[c2 + i] = 0.f;
        for (size_t r = 0; r < q; ++r) {
          for (size_t i = 0; i < cols; ++i) {
            x[r * cols + i] = (i % 16 == 0 && r == 0) ? -0.f : n(rng);
          }
          if (r == 1) {  // lane-wise exact cancellation in row 0 of the output
            for (size_t i = 0; i + 16 < cols; i += 32) {
              for (size_t l = 0; l < 16 && i + 16 + l < cols; ++l) x[r * cols + i + 16 + l] = -x[r * cols + i + l];
            }
          }
          std::copy_n(&x[r * cols], cols, &x2[r * c2]);
          for (size_t i = cols; i < c2; ++i) x2[r * c2 + i] = i % 3 == 0 ? -0.f : -std::fabs(n(rng));
        }
        PackedMatrix a = PackedMatrix::pack(w.data(), DType::F32, rows, cols, wt);
        PackedMatrix b = PackedMatrix::pack(w2.data(), DType::F32, rows, c2, wt);
        std::vector<float> y(q * rows), y2(q * rows);
        kernels::matmul(a, x.data(), q, y.data(), nullptr);
        kernels::matmul(b, x2.data(), q, y2.data(), nullptr);
        SCOPED_TRACE(testing::Message() << "cols " << cols << " + " << extra);
        EXPECT_EQ(test::first_bit_difference(y, y2), -1);
        for (size_t r = 0; r < q; ++r) EXPECT_FALSE(std::signbit(y2[r * rows + 1]));  // +0, not -0
      }
    }
  }
}

TEST(Widen, RmsNormOverFourToTheKDimsWithRescaledWeightsIsBitwise) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.f, 1.f);
  for (size_t d : {64, 128, 192}) {
    for (int k : {1, 2}) {
      const size_t d2 = d << (2 * k);
      std::vector<float> x(d2, 0.f), w(d), w2(d2, 0.f), y(d), y2(d2);
      for (size_t i = 0; i < d; ++i) {
        x[i] = n(rng) * (i % 7 == 0 ? 1e-3f : 3.f);
        w[i] = 1.f + 0.1f * n(rng);
        w2[i] = std::ldexp(w[i], -k);
      }
      const float eps = 1e-5f, eps2 = float(double(eps) / double(1 << (2 * k)));
      kernels::rmsnorm(x.data(), w.data(), d, eps, y.data());
      kernels::rmsnorm(x.data(), w2.data(), d2, eps2, y2.data());
      std::vector<float> head(y2.begin(), y2.begin() + long(d));
      EXPECT_EQ(test::first_bit_difference(y, head), -1) << "d " << d << " k " << k;
    }
  }
}

// Random checkpoints of every family, widened 4x in d, 2x elsewhere, +2 layers.
TEST(Widen, RandomCheckpointsOfEveryFamilyKeepTheirLogits) {
  for (Arch arch : test::every_arch()) {
    test::RandomSpec spec = test::RandomSpec::for_arch(arch);
    const std::string src = test::random_hf_checkpoint("widen-src", spec);
    const ModelConfig c = read_model_config(src);
    if (arch == Arch::Gemma4 || arch == Arch::Qwen35) {  // layers of several kinds: refused
      test::expect_error<ConfigError>([&] { plan_widen(c, WidenShape{}, false); },
                                      {"widen", arch_name(arch), "not supported"});
      continue;
    }
    const std::string shape = fmt::format("d_model={},layers={},ffn={},heads={},kv_heads={}",
                                          4 * c.d_model, c.n_layers + 2, 2 * c.ffn,
                                          2 * c.n_heads, 2 * c.n_kv_heads);
    const bool gemma = arch == Arch::Gemma2 || arch == Arch::Gemma3;
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(testing::Message() << arch_name(arch) << " " << dtype_name(dt));
      const std::string dir = widen_to(src, shape, dt);
      const WeightType wt = dt == DType::BF16 ? WeightType::BF16 : WeightType::F32;
      std::mt19937 rng(11);
      std::vector<int32_t> toks = test::random_tokens(rng, 20, c.vocab);
      Outputs a = forward_all(src, wt, toks), b = forward_all(dir, wt, toks);
      ASSERT_EQ(b.config.d_model, 4 * c.d_model);
      const std::vector<float> bh = first_cols(b.rows.hidden, 4 * c.d_model, c.d_model);
      if (!gemma) {
        EXPECT_EQ(test::first_bit_difference(a.rows.logits, b.rows.logits), -1);
        EXPECT_EQ(test::first_bit_difference(a.rows.hidden, bh), -1);
        if (dt == DType::BF16) {  // at its stored precision: bf16 values held in fp32
          Outputs f = forward_all(dir, WeightType::F32, toks);
          EXPECT_EQ(test::first_bit_difference(a.rows.logits, f.rows.logits), -1);
        }
      } else {
        // Gemma's stored w' = (1 + w)/2 - 1 is rounded to fp32 (docs/WIDEN.md):
        // a relative error of ~1e-7 per norm, O(layers · norms) of them.
        float mx = 0;
        for (float v : a.rows.logits) mx = std::max(mx, std::fabs(v));
        EXPECT_LE(max_abs_diff(a.rows.logits, b.rows.logits), 1e-4f * (1 + mx));
      }
      for (size_t r = 0; r < toks.size(); ++r) {  // the extra residual dims stay exactly +0
        for (int i = c.d_model; i < 4 * c.d_model; ++i) {
          float v = b.rows.hidden[r * size_t(4 * c.d_model) + size_t(i)];
          ASSERT_TRUE(v == 0.f && !std::signbit(v)) << "row " << r << " dim " << i;
        }
      }
      LoadOptions o;
      o.weights = wt;
      Model ma(load_model(src, o)), mb(load_model(dir, o));
      for (int p = 0; p < 3; ++p) {
        std::vector<int32_t> prompt = test::random_tokens(rng, 2 + 3 * p, c.vocab);
        EXPECT_EQ(greedy(ma, prompt, 12), greedy(mb, prompt, 12)) << "prompt " << p;
      }
    }
  }
}

TEST(Widen, Stories260KWideningIsBitwiseAndTheConversionWithinRounding) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  const ModelConfig c = read_model_config(path);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const WeightType wt = dt == DType::BF16 ? WeightType::BF16 : WeightType::F32;
    const std::string same = widen_to(path, "layers=" + std::to_string(c.n_layers), dt);
    const std::string wide =
        widen_to(path, "d_model=256,layers=8,ffn=1024,heads=32,kv_heads=16", dt);
    const ModelConfig wc = read_hf_config(wide);
    EXPECT_EQ(wc.eos_ids, (std::vector<int32_t>{1, 2}));  // run.c's stop on BOS carried over
    LoadedModel probe = load_model(wide, {});
    EXPECT_TRUE(probe.tokenizer.ends_with("tokenizer.bin")) << probe.tokenizer;
    std::mt19937 rng(5);
    std::vector<int32_t> toks = test::random_tokens(rng, 40, c.vocab);
    toks[0] = 1;
    Outputs o = forward_all(path, wt, toks), s = forward_all(same, wt, toks),
            w = forward_all(wide, wt, toks);
    // The widening: bitwise against the same-shape conversion.
    EXPECT_EQ(test::first_bit_difference(s.rows.logits, w.rows.logits), -1);
    EXPECT_EQ(test::first_bit_difference(s.rows.hidden, first_cols(w.rows.hidden, 256, 64)), -1);
    // The conversion: q·k summed in rotate-half order. An 8-term fp32 dot
    // reordered moves each score by <= 8·2^-24·Σ|q_i k_i|; through 5 layers
    // the logits (|logit| <~ 20) move by far less than 1e-3.
    float mx = 0;
    for (float v : o.rows.logits) mx = std::max(mx, std::fabs(v));
    EXPECT_LE(max_abs_diff(o.rows.logits, s.rows.logits), 1e-4f * (1 + mx));
    LoadOptions lo;
    lo.weights = wt;
    Model mo(load_model(path, lo)), mw(load_model(wide, lo));
    for (int p = 0; p < 4; ++p) {
      std::vector<int32_t> prompt = test::random_tokens(rng, 1 + 4 * p, c.vocab);
      prompt[0] = 1;
      EXPECT_EQ(greedy(mo, prompt, 40), greedy(mw, prompt, 40)) << "prompt " << p;
    }
  }
}

TEST(Widen, OneBPresetForStories260K) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  const ModelConfig c = read_model_config(path);
  WidenPlan p = plan_widen(c, parse_widen_shape("1b", c), false);
  EXPECT_EQ(p.dst.d_model, 1024);
  EXPECT_EQ(p.dst.n_layers, 32);
  EXPECT_EQ(p.dst.ffn, 8192);
  EXPECT_EQ(p.dst.head_dim, c.head_dim);
  EXPECT_EQ(p.dst.n_heads * p.dst.head_dim, 1024);
  EXPECT_EQ(p.dst.n_heads / p.dst.n_kv_heads, c.n_heads / c.n_kv_heads);
  const double d = 1024, q = p.dst.n_heads * 8.0, kv = p.dst.n_kv_heads * 8.0;
  const double per_layer = d * (q + 2 * kv) + q * d + 3 * d * 8192;
  EXPECT_GE(2 * (32 * per_layer + c.vocab * d), 1.5e9);  // bf16 matrices
  ASSERT_EQ(p.inexact.size(), 1u);  // only the RoPE layout conversion
}

TEST(Widen, BadShapesAreRefusedNamingTheField) {
  test::RandomSpec spec = test::RandomSpec::for_arch(Arch::Llama);  // d 64, 4/2 heads of 16
  const ModelConfig c = read_model_config(test::random_hf_checkpoint("widen-bad", spec));
  auto refuses = [&](const std::string& shape, const std::string& needle, bool allow = false) {
    try {
      plan_widen(c, parse_widen_shape(shape, c), allow);
      ADD_FAILURE() << shape << " was accepted";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refuses("d_model=32", "d_model = 32 is narrower");
  refuses("layers=1", "layers = 1 is narrower");
  refuses("ffn=64", "ffn = 64 is narrower");
  refuses("head_dim=32", "head_dim = 32 differs");
  refuses("d_model=128", "not a power of 4");
  refuses("heads=4,kv_heads=4", "cannot keep their kv heads");
  refuses("heads=6,kv_heads=4", "not a multiple");
  // head_dim 8: a query head moving by an odd number of heads changes its
  // o_proj columns' lanes (g 2 -> 3); moving by 2 heads (g 2 -> 4) does not.
  test::RandomSpec narrow = spec;
  narrow.n_heads = 8;
  narrow.n_kv_heads = 4;
  narrow.head_dim = 8;
  const ModelConfig cn = read_model_config(test::random_hf_checkpoint("widen-hd8", narrow));
  EXPECT_THROW(plan_widen(cn, parse_widen_shape("heads=12,kv_heads=4", cn), false), ShapeError);
  EXPECT_TRUE(plan_widen(cn, parse_widen_shape("heads=12,kv_heads=4", cn), true).inexact.size() == 1);
  EXPECT_TRUE(plan_widen(cn, parse_widen_shape("heads=16,kv_heads=4", cn), false).exact());
  EXPECT_NO_THROW(plan_widen(c, parse_widen_shape("d_model=128", c), true));
  EXPECT_THROW(parse_widen_shape("d_model=x", c), InputError);
  EXPECT_THROW(parse_widen_shape("width=3", c), InputError);
  EXPECT_THROW(parse_widen_shape("2b", c), InputError);
}

}  // namespace
}  // namespace mtp::model
