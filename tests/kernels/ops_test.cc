// Row-wise ops (SIMD and scalar reference) against straightforward
// double-precision references, plus the invariance properties the forward pass
// relies on: elementwise maps do not depend on an element's position in a call,
// and attention over a ring buffer equals attention over contiguous storage.
// Every test runs once per SIMD target the host executes (kernels/simd.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "kernels/simd.h"
#include "test_util.h"

namespace mtp::kernels {
namespace {

using test::randn;
using test::float_bits;

// |got - want| <= rel·|want| + abs, elementwise.
void expect_close(const float* got, const std::vector<double>& want, double rel, double abs,
                  const char* what) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), rel * std::fabs(want[i]) + abs)
        << what << " [" << i << "] got " << got[i] << " want " << want[i];
}

// The multiply-add of the current target: fused on FMA targets, else the
// product rounded and then added (what hn::MulAdd does on sse4 / scalar).
float madd(float a, float b, float c) {
  if (simd_target_has_fma()) return std::fma(a, b, c);
  const float p = a * b;  // ISO C++ mode: g++ does not contract this
  return p + c;
}

// Pins the kernels to the parameter's SIMD target for one test.
class Ops : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { set_simd_target(GetParam()); }
  void TearDown() override { set_simd_target(""); }
};
INSTANTIATE_TEST_SUITE_P(Simd, Ops, ::testing::ValuesIn(available_simd_targets()),
                         [](const auto& info) { return info.param; });

const size_t kSizes[] = {1, 3, 15, 16, 17, 33, 64, 100, 257, 2048};

TEST_P(Ops, RmsNormMatchesDouble) {
  std::mt19937 rng(1);
  for (size_t n : kSizes) {
    auto x = randn(n, rng, 3.f), w = randn(n, rng);
    std::vector<double> want(n);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (size_t i = 0; i < n; ++i) want[i] = x[i] * inv * w[i];
    std::vector<float> out(n), outr(n);
    rmsnorm(x.data(), w.data(), n, 1e-5f, out.data());
    ref::rmsnorm(x.data(), w.data(), n, 1e-5f, outr.data());
    expect_close(out.data(), want, 1e-5, 1e-7, "simd");
    expect_close(outr.data(), want, 1e-5, 1e-7, "ref");
    rmsnorm(x.data(), w.data(), n, 1e-5f, x.data());  // out may alias x
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(x[i]), float_bits(out[i]));
  }
}

TEST_P(Ops, RopeBothPairings) {
  std::mt19937 rng(2);
  const size_t hd = 64;
  std::vector<float> c(hd / 2), s(hd / 2);
  for (size_t i = 0; i < hd / 2; ++i) {
    double ang = 7.0 * std::pow(10000.0, -2.0 * i / hd);
    c[i] = float(std::cos(ang));
    s[i] = float(std::sin(ang));
  }
  for (bool inter : {false, true}) {
    auto x = randn(hd, rng);
    std::vector<double> want(x.begin(), x.end());
    for (size_t i = 0; i < hd / 2; ++i) {
      size_t a = inter ? 2 * i : i, b = inter ? 2 * i + 1 : i + hd / 2;
      want[a] = double(x[a]) * c[i] - double(x[b]) * s[i];
      want[b] = double(x[a]) * s[i] + double(x[b]) * c[i];
    }
    rope(x.data(), c.data(), s.data(), hd, inter);
    expect_close(x.data(), want, 1e-6, 1e-6, inter ? "interleaved" : "rotate-half");
  }
}

std::vector<double> softmax_double(const std::vector<float>& x) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, double(v));
  std::vector<double> e(x.size());
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += e[i] = std::exp(double(x[i]) - m);
  for (auto& v : e) v /= s;
  return e;
}

TEST_P(Ops, SoftmaxMatchesDouble) {
  std::mt19937 rng(3);
  for (size_t n : kSizes) {
    auto x = randn(n, rng, 4.f);
    if (n > 2) x[1] = -std::numeric_limits<float>::infinity();  // masked entry
    auto want = softmax_double(x);
    auto a = x, b = x;
    softmax(a.data(), n);
    ref::softmax(b.data(), n);
    expect_close(a.data(), want, 1e-5, 1e-7, "simd");
    expect_close(b.data(), want, 1e-5, 1e-7, "ref");
    if (n > 2) {
      EXPECT_EQ(a[1], 0.f);
    }
  }
  std::vector<float> big = {1000.f, 999.f, -1000.f};  // max-subtraction avoids overflow
  softmax(big.data(), 3);
  EXPECT_NEAR(big[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(big[2], 0.f);
}

TEST_P(Ops, ActivationsMatchDouble) {
  std::mt19937 rng(4);
  for (size_t n : kSizes) {
    auto g = randn(n, rng, 3.f), u = randn(n, rng);
    if (n > 3) {
      g[0] = -200.f;  // exp overflow path: silu -> -0
      g[1] = 200.f;
      g[2] = 0.f;
    }
    std::vector<double> ws(n), wg(n), wc(n);
    for (size_t i = 0; i < n; ++i) {
      double x = g[i];
      ws[i] = x / (1 + std::exp(-x)) * u[i];
      wg[i] = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u[i];
      wc[i] = 30.0 * std::tanh(x * 10 / 30.0);
    }
    std::vector<float> out(n);
    silu_mul(g.data(), u.data(), n, out.data());
    expect_close(out.data(), ws, 2e-6, 1e-7, "silu");
    ref::silu_mul(g.data(), u.data(), n, out.data());
    expect_close(out.data(), ws, 2e-6, 1e-7, "silu ref");
    gelu_tanh_mul(g.data(), u.data(), n, out.data());
    expect_close(out.data(), wg, 4e-6, 1e-6, "gelu");
    ref::gelu_tanh_mul(g.data(), u.data(), n, out.data());
    expect_close(out.data(), wg, 4e-6, 1e-6, "gelu ref");
    std::vector<float> y(n);
    for (size_t i = 0; i < n; ++i) y[i] = g[i] * 10;
    auto yr = y;
    softcap(y.data(), n, 30.f);
    ref::softcap(yr.data(), n, 30.f);
    expect_close(y.data(), wc, 4e-6, 1e-6, "softcap");
    expect_close(yr.data(), wc, 4e-6, 1e-6, "softcap ref");
  }
}

TEST_P(Ops, ElementwiseBitsIndependentOfPositionInCall) {
  // The forward pass calls these on [q, n] at once: an element's result must be
  // the same as when its row is processed alone (tails take the vector path).
  std::mt19937 rng(5);
  const size_t n = 37, q = 7;
  auto g = randn(q * n, rng, 3.f), u = randn(q * n, rng);
  for (auto fn : {&silu_mul, &gelu_tanh_mul}) {
    std::vector<float> all(q * n), one(n);
    fn(g.data(), u.data(), q * n, all.data());
    for (size_t r = 0; r < q; ++r) {
      fn(g.data() + r * n, u.data() + r * n, n, one.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(all[r * n + i]), float_bits(one[i])) << r << "," << i;
    }
  }
  auto all = g;
  softcap(all.data(), q * n, 5.f);
  for (size_t r = 0; r < q; ++r) {
    std::vector<float> one(g.begin() + r * n, g.begin() + (r + 1) * n);
    softcap(one.data(), n, 5.f);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(all[r * n + i]), float_bits(one[i]));
  }
}

// Double-precision attention over positions [lo, hi] of contiguous [pos, stride].
std::vector<double> attend_double(const float* q, const float* k, const float* v, size_t stride,
                                  size_t lo, size_t hi, size_t hd, double scale, double cap) {
  std::vector<double> s;
  for (size_t p = lo; p <= hi; ++p) {
    double d = 0;
    for (size_t i = 0; i < hd; ++i) d += double(q[i]) * k[p * stride + i];
    d *= scale;
    if (cap > 0) d = cap * std::tanh(d / cap);
    s.push_back(d);
  }
  double m = -INFINITY, sum = 0;
  for (double x : s) m = std::max(m, x);
  for (double& x : s) sum += x = std::exp(x - m);
  std::vector<double> out(hd, 0.0);
  for (size_t j = 0; j < s.size(); ++j)
    for (size_t i = 0; i < hd; ++i) out[i] += s[j] / sum * v[(lo + j) * stride + i];
  return out;
}

TEST_P(Ops, AttendMatchesDoubleAndRingBuffer) {
  std::mt19937 rng(6);
  // Narrow heads (below the SIMD width: 4 and 8 transposed in registers, the
  // others scalar chains), full vectors, and full vectors plus a remainder.
  for (size_t hd : {1, 3, 4, 5, 8, 12, 15, 16, 17, 24, 64, 72, 80, 128, 136, 256}) {
    for (float cap : {0.f, 20.f}) {
      const size_t stride = hd + 5, n_pos = 50;
      auto k = randn(n_pos * stride, rng), v = randn(n_pos * stride, rng), q = randn(hd, rng, 2.f);
      const float scale = 1.f / std::sqrt(float(hd));
      for (auto [lo, hi] : {std::pair<size_t, size_t>{0, 0}, {0, 6}, {0, 49}, {13, 49}, {30, 46}}) {
        SCOPED_TRACE(::testing::Message() << "hd=" << hd << " cap=" << cap << " [" << lo << ","
                                          << hi << "]");
        std::vector<float> scores(hi - lo + 1), out(hd), outr(hd);
        attend(q.data(), k.data(), v.data(), stride, n_pos, lo, hi, hd, scale, cap,
               scores.data(), out.data());
        ref::attend(q.data(), k.data(), v.data(), stride, n_pos, lo, hi, hd, scale, cap,
                    scores.data(), outr.data());
        auto want = attend_double(q.data(), k.data(), v.data(), stride, lo, hi, hd, scale, cap);
        expect_close(out.data(), want, 1e-4, 2e-5, "simd");
        expect_close(outr.data(), want, 1e-4, 2e-5, "ref");
        // Ring buffer: n_slots = window size, position p in slot p % n_slots.
        const size_t n_slots = hi - lo + 1 + (lo % 3);
        std::vector<float> rk(n_slots * stride), rv(n_slots * stride);
        for (size_t p = lo; p <= hi; ++p) {
          std::memcpy(&rk[(p % n_slots) * stride], &k[p * stride], hd * 4);
          std::memcpy(&rv[(p % n_slots) * stride], &v[p * stride], hd * 4);
        }
        std::vector<float> ring(hd);
        attend(q.data(), rk.data(), rv.data(), stride, n_slots, lo, hi, hd, scale, cap,
               scores.data(), ring.data());
        for (size_t i = 0; i < hd; ++i) ASSERT_EQ(float_bits(ring[i]), float_bits(out[i])) << "ring " << i;
      }
    }
  }
}

// attend_slots: the same keys stored in scattered slots (a draft tree's:
// committed positions in a ring, ancestors in tree slots) give attend's bits
// when listed in position order (the unused slots hold values that would
// show in the result if they were read).
TEST_P(Ops, AttendSlotsEqualsAttendOverTheSameKeysInOrder) {
  std::mt19937 rng(8);
  for (size_t hd : {1, 3, 4, 8, 12, 16, 17, 64, 72, 128}) {
    for (float cap : {0.f, 20.f}) {
      const size_t stride = hd + 3, n_pos = 40;
      auto k = randn(n_pos * stride, rng), v = randn(n_pos * stride, rng), q = randn(hd, rng, 2.f);
      const float scale = 1.f / std::sqrt(float(hd));
      for (auto [lo, hi] : {std::pair<size_t, size_t>{0, 0}, {0, 9}, {0, 39}, {11, 37}}) {
        SCOPED_TRACE(::testing::Message() << "hd=" << hd << " cap=" << cap << " [" << lo << ","
                                          << hi << "]");
        const size_t n = hi - lo + 1;
        std::vector<float> scores(n), want(hd), got(hd);
        attend(q.data(), k.data(), v.data(), stride, n_pos, lo, hi, hd, scale, cap,
               scores.data(), want.data());
        // Scatter the keys into a larger store at a random permutation of slots.
        const size_t n_store = n + 7;
        std::vector<uint32_t> perm(n_store);
        std::iota(perm.begin(), perm.end(), 0u);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::vector<float> sk(n_store * stride, 1e3f), sv(n_store * stride, -1e3f);
        std::vector<uint32_t> slots(n);
        for (size_t j = 0; j < n; ++j) {
          slots[j] = perm[j];
          std::memcpy(&sk[slots[j] * stride], &k[(lo + j) * stride], hd * 4);
          std::memcpy(&sv[slots[j] * stride], &v[(lo + j) * stride], hd * 4);
        }
        attend_slots(q.data(), sk.data(), sv.data(), stride, slots.data(), n, hd, scale, cap,
                     scores.data(), got.data());
        for (size_t i = 0; i < hd; ++i) ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << "dim " << i;
      }
    }
  }
}

// attend()'s documented order, replayed with scalar fmas: out[i] is the chain
// over the returned probabilities, and for narrow heads each score is the
// chain over dims (then the same scale, softcap and softmax kernels). The
// value chain uses the target's multiply-add (fused only on FMA targets); the
// narrow-head score chain is std::fma on every target.
TEST_P(Ops, AttendFollowsItsFixedOrder) {
  std::mt19937 rng(7);
  const size_t lanes = simd_f32_lanes();
  for (size_t hd : {1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 64, 72, 128}) {
    const size_t stride = 3 * hd + 1, n_slots = 45;
    auto k = randn(n_slots * stride, rng), v = randn(n_slots * stride, rng), q = randn(hd, rng);
    const float scale = 1.f / std::sqrt(float(hd));
    for (float cap : {0.f, 3.f}) {
      for (auto [lo, hi] : {std::pair<size_t, size_t>{0, 0}, {5, 12}, {0, 44}, {30, 66}}) {
        SCOPED_TRACE(::testing::Message() << "hd=" << hd << " cap=" << cap << " [" << lo << ","
                                          << hi << "]");
        const size_t n = hi - lo + 1;
        auto row = [&](const std::vector<float>& m, size_t j) {
          return m.data() + ((lo + j) % n_slots) * stride;
        };
        std::vector<float> p(n), out(hd);
        attend(q.data(), k.data(), v.data(), stride, n_slots, lo, hi, hd, scale, cap, p.data(),
               out.data());
        for (size_t i = 0; i < hd; ++i) {
          float acc = 0.f;
          for (size_t j = 0; j < n; ++j) acc = madd(p[j], row(v, j)[i], acc);
          ASSERT_EQ(float_bits(out[i]), float_bits(acc)) << "out " << i;
        }
        if (hd >= lanes) continue;  // wide heads: lane sums, target-dependent
        std::vector<float> s(n);
        for (size_t j = 0; j < n; ++j) {
          float acc = 0.f;
          for (size_t t = 0; t < hd; ++t) acc = std::fma(q[t], row(k, j)[t], acc);
          s[j] = acc * scale;
        }
        if (cap > 0.f) softcap(s.data(), n, cap);
        softmax(s.data(), n);
        for (size_t j = 0; j < n; ++j) ASSERT_EQ(float_bits(p[j]), float_bits(s[j])) << "p " << j;
      }
    }
  }
}

// The forward's use: q rows at positions P..P+q-1 (full or sliding window).
// In a verify call every row's K/V is in the cache before any row attends; in
// one-token decodes the later slots do not exist yet (here: NaN). Each row's
// output must have the same bits both ways, for every q.
TEST_P(Ops, AttendRowsBitwiseIndependentOfBatch) {
  std::mt19937 rng(8);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t hd : {4, 8, 12, 16, 24, 64, 128}) {
    const size_t kv_heads = 2, stride = kv_heads * hd, P = 37;
    for (size_t window : {size_t(0), size_t(20)}) {
      for (size_t q = 1; q <= 9; ++q) {
        SCOPED_TRACE(::testing::Message() << "hd=" << hd << " window=" << window << " q=" << q);
        // A ring of window + q slots for sliding layers, else the full context.
        const size_t n_slots = window ? window + q : P + q;
        auto kv_rows = randn(2 * (P + q) * stride, rng);  // K then V of every position
        std::vector<float> k(n_slots * stride, nan), v(n_slots * stride, nan);
        auto put = [&](size_t pos) {
          std::memcpy(&k[(pos % n_slots) * stride], &kv_rows[pos * stride], stride * 4);
          std::memcpy(&v[(pos % n_slots) * stride], &kv_rows[(P + q + pos) * stride], stride * 4);
        };
        for (size_t pos = 0; pos < P; ++pos) put(pos);
        auto qs = randn(q * hd, rng);
        auto attend_row = [&](size_t r, size_t h, float* out) {
          const size_t hi = P + r, lo = window && hi + 1 > window ? hi + 1 - window : 0;
          std::vector<float> scores(hi - lo + 1);
          attend(qs.data() + r * hd, k.data() + h * hd, v.data() + h * hd, stride, n_slots, lo,
                 hi, hd, 0.3f, 0.f, scores.data(), out);
        };
        std::vector<float> decode(q * kv_heads * hd), verify(q * kv_heads * hd);
        for (size_t r = 0; r < q; ++r) {  // one row per call, cache grows row by row
          put(P + r);
          for (size_t h = 0; h < kv_heads; ++h) attend_row(r, h, &decode[(r * kv_heads + h) * hd]);
        }
        for (size_t r = q; r-- > 0;) {  // all rows' K/V present, rows in reverse order
          for (size_t h = 0; h < kv_heads; ++h) attend_row(r, h, &verify[(r * kv_heads + h) * hd]);
        }
        for (size_t i = 0; i < decode.size(); ++i) {
          ASSERT_FALSE(std::isnan(decode[i])) << i;
          ASSERT_EQ(float_bits(decode[i]), float_bits(verify[i])) << i;
        }
      }
    }
  }
}

// attend_group: several queries reading the same k/v (a kv head's query heads
// over the rows of a verify), each over its own positions, give attend()'s bits
// for each — whatever else shares the call, and reading no slot outside the
// union of their ranges (those hold NaN).
TEST_P(Ops, AttendGroupEqualsAttendPerQuery) {
  std::mt19937 rng(21);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t hd : {1, 3, 4, 5, 8, 12, 16, 24, 64, 72, 128}) {
    for (float cap : {0.f, 5.f}) {
      for (int trial = 0; trial < 6; ++trial) {
        const size_t stride = hd + 5, n_slots = 20 + rng() % 60;
        const size_t U = 1 + rng() % n_slots;            // union of the ranges
        const size_t lo = rng() % 200;                   // the ring wraps for lo > 0
        const size_t nq = 1 + rng() % 40;
        std::vector<float> k(n_slots * stride, nan), v(n_slots * stride, nan);
        for (size_t u = 0; u < U; ++u) {
          const size_t slot = (lo + u) % n_slots;
          auto kr = randn(hd, rng), vr = randn(hd, rng);
          std::copy(kr.begin(), kr.end(), k.begin() + slot * stride);
          std::copy(vr.begin(), vr.end(), v.begin() + slot * stride);
        }
        const auto qv = randn(nq * hd, rng, 2.f);
        std::vector<AttendQuery> qs(nq);
        // Every query's scores in one buffer, NaN between them: a score read
        // outside a query's own range shows in its output.
        std::vector<float> scores(nq * (U + 16), nan);
        std::vector<std::vector<float>> outs(nq, std::vector<float>(hd, -7.f));
        for (size_t i = 0; i < nq; ++i) {
          size_t a = rng() % U, b = rng() % U;
          if (a > b) std::swap(a, b);
          if (i == 0) a = 0;        // the union is [lo, lo + U)
          if (i == 1) b = U - 1;
          if (nq == 1) b = U - 1;
          qs[i] = {qv.data() + i * hd, lo + a, lo + b, scores.data() + i * (U + 16) + 8,
                   outs[i].data()};
        }
        const float scale = 1.f / std::sqrt(float(hd));
        attend_group(qs, k.data(), v.data(), stride, n_slots, hd, scale, cap);
        for (size_t i = 0; i < nq; ++i) {
          SCOPED_TRACE(::testing::Message() << "hd=" << hd << " cap=" << cap << " trial="
                                            << trial << " query " << i << " of " << nq << " ["
                                            << qs[i].lo << "," << qs[i].hi << "] slots "
                                            << n_slots);
          std::vector<float> ws(qs[i].hi - qs[i].lo + 1), wo(hd);
          attend(qs[i].q, k.data(), v.data(), stride, n_slots, qs[i].lo, qs[i].hi, hd, scale,
                 cap, ws.data(), wo.data());
          for (size_t d = 0; d < hd; ++d) ASSERT_EQ(float_bits(outs[i][d]), float_bits(wo[d])) << "out " << d;
          for (size_t j = 0; j < ws.size(); ++j)
            ASSERT_EQ(float_bits(qs[i].scores[j]), float_bits(ws[j])) << "p " << j;
        }
      }
    }
  }
}

TEST_P(Ops, AttendGroupRefusesRangesPastTheRing) {
  std::vector<float> k(10 * 4, 0.f), v = k, q(4, 1.f), s(16), o(4);
  const AttendQuery wide[] = {{q.data(), 3, 5, s.data(), o.data()},
                              {q.data(), 5, 13, s.data(), o.data()}};  // [3, 13]: 11 > 10 slots
  EXPECT_THROW(attend_group(wide, k.data(), v.data(), 4, 10, 4, 1.f, 0.f), ShapeError);
  const AttendQuery empty[] = {{q.data(), 5, 4, s.data(), o.data()}};
  EXPECT_THROW(attend_group(empty, k.data(), v.data(), 4, 10, 4, 1.f, 0.f), ShapeError);
  std::vector<AttendQuery> many(kAttendGroupMax + 1, {q.data(), 0, 0, s.data(), o.data()});
  EXPECT_THROW(attend_group(many, k.data(), v.data(), 4, 10, 4, 1.f, 0.f), ShapeError);
}

TEST_P(Ops, ArgmaxTiesAndNaN) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  std::vector<float> a = {1.f, 3.f, 2.f, 3.f};
  EXPECT_EQ(argmax(a.data(), a.size()), 1u);
  std::vector<float> b = {nan, -1.f, nan, -1.f, -2.f};
  EXPECT_EQ(argmax(b.data(), b.size()), 1u);
  std::vector<float> c = {nan, nan};
  EXPECT_EQ(argmax(c.data(), c.size()), 0u);
  std::vector<float> d = {-inf, -inf, -inf};
  EXPECT_EQ(argmax(d.data(), d.size()), 0u);
  std::vector<float> e = {0.f, nan, inf, 5.f, inf};
  EXPECT_EQ(argmax(e.data(), e.size()), 2u);
  std::vector<float> f(1000, 0.5f);
  f[999] = 0.75f;
  f[500] = 0.75f;
  EXPECT_EQ(argmax(f.data(), f.size()), 500u);
}

}  // namespace
}  // namespace mtp::kernels
