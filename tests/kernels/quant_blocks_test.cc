// ggml block formats (kernels/quant_blocks.h): hand-built blocks decode to the
// values the format definition gives (expected values worked out by hand from
// ggml's layout, not from our dequantizer), and our quantizer stays within
// each type's documented error bound.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant_blocks.h"
#include "test_util.h"

namespace mtp::kernels {
namespace {

void put16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

std::vector<float> deq(GgmlType t, const std::vector<uint8_t>& b, size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, b.data(), n, y.data());
  return y;
}

TEST(QuantBlocks, Q8_0HandBuilt) {
  std::vector<uint8_t> b(34);
  put16(b.data(), 0x3800);  // 0.5
  for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(i - 16);
  const auto y = deq(GgmlType::Q8_0, b, 32);
  EXPECT_EQ(y[0], -8.f);
  EXPECT_EQ(y[16], 0.f);
  EXPECT_EQ(y[31], 7.5f);
}

TEST(QuantBlocks, Q4_0HandBuilt) {
  std::vector<uint8_t> b(18);
  put16(b.data(), 0x4000);  // 2.0
  for (int i = 0; i < 16; ++i) b[2 + i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const auto y = deq(GgmlType::Q4_0, b, 32);
  EXPECT_EQ(y[0], -16.f);   // low nibble 0: 2·(0 − 8)
  EXPECT_EQ(y[15], 14.f);   // low nibble 15
  EXPECT_EQ(y[16], 14.f);   // element 16 = high nibble of byte 0 = 15
  EXPECT_EQ(y[31], -16.f);  // high nibble of byte 15 = 0
  EXPECT_EQ(y[9], 2.f);
}

TEST(QuantBlocks, Q5_0HandBuilt) {
  std::vector<uint8_t> b(22);
  put16(b.data(), 0x3C00);  // 1.0
  const uint32_t qh = 0x80000001u;  // fifth bit of elements 0 and 31
  std::memcpy(b.data() + 2, &qh, 4);
  for (int i = 0; i < 16; ++i) b[6 + i] = 0x21;  // low nibble 1, high nibble 2
  const auto y = deq(GgmlType::Q5_0, b, 32);
  EXPECT_EQ(y[0], 1.f);     // (1 | 16) − 16
  EXPECT_EQ(y[1], -15.f);   // 1 − 16
  EXPECT_EQ(y[16], -14.f);  // 2 − 16
  EXPECT_EQ(y[31], 2.f);    // (2 | 16) − 16
}

TEST(QuantBlocks, Q4_1HandBuilt) {
  std::vector<uint8_t> b(20);
  put16(b.data(), 0x3800);      // d = 0.5
  put16(b.data() + 2, 0xC200);  // m = -3.0
  for (int i = 0; i < 16; ++i) b[4 + i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const auto y = deq(GgmlType::Q4_1, b, 32);
  EXPECT_EQ(y[0], -3.f);    // 0.5·0 − 3
  EXPECT_EQ(y[15], 4.5f);   // 0.5·15 − 3
  EXPECT_EQ(y[16], 4.5f);   // element 16 = high nibble of byte 0 = 15
  EXPECT_EQ(y[31], -3.f);   // high nibble of byte 15 = 0
  EXPECT_EQ(y[9], 1.5f);    // 0.5·9 − 3
}

TEST(QuantBlocks, Q5_1HandBuilt) {
  std::vector<uint8_t> b(24);
  put16(b.data(), 0x3C00);      // d = 1.0
  put16(b.data() + 2, 0x4000);  // m = 2.0
  const uint32_t qh = 0x80000001u;  // fifth bit of elements 0 and 31
  std::memcpy(b.data() + 4, &qh, 4);
  for (int i = 0; i < 16; ++i) b[8 + i] = 0x21;  // low nibble 1, high nibble 2
  const auto y = deq(GgmlType::Q5_1, b, 32);
  EXPECT_EQ(y[0], 19.f);    // (1 | 16) + 2
  EXPECT_EQ(y[1], 3.f);     // 1 + 2
  EXPECT_EQ(y[16], 4.f);    // 2 + 2
  EXPECT_EQ(y[31], 20.f);   // (2 | 16) + 2
}

// Scales sc = {1, 2, 3, 4, 5, 37, 6, 7}, mins m = {0, 1, 2, 3, 4, 5, 6, 23},
// packed by hand into ggml's 12 bytes (sub-blocks 4..7 keep their low 4 bits
// in bytes 8..11 and their top 2 bits in bits 6..7 of bytes 0..3 / 4..7).
void k_scales(uint8_t* s) {
  const uint8_t v[12] = {1, 2 | 2 << 6, 3, 4, 0, 1, 2, 3 | 1 << 6,
                         5 | 4 << 4, 5 | 5 << 4, 6 | 6 << 4, 7 | 7 << 4};
  std::memcpy(s, v, 12);
}

TEST(QuantBlocks, ScaleMinK4HandBuilt) {
  uint8_t s[12];
  k_scales(s);
  const uint8_t want_sc[8] = {1, 2, 3, 4, 5, 37, 6, 7}, want_m[8] = {0, 1, 2, 3, 4, 5, 6, 23};
  for (size_t j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(s, j, &sc, &m);
    EXPECT_EQ(sc, want_sc[j]) << j;
    EXPECT_EQ(m, want_m[j]) << j;
  }
}

TEST(QuantBlocks, UnpackScalesK4MatchesScaleMinK4) {
  std::mt19937 rng(3);
  for (int rep = 0; rep < 200; ++rep) {
    uint8_t s[12], sc[8], m[8];
    for (auto& b : s) b = static_cast<uint8_t>(rng());
    unpack_scales_k4(s, sc, m);
    for (size_t j = 0; j < 8; ++j) {
      uint8_t a, b;
      scale_min_k4(s, j, &a, &b);
      ASSERT_EQ(sc[j], a) << rep << " " << j;
      ASSERT_EQ(m[j], b) << rep << " " << j;
    }
  }
}

TEST(QuantBlocks, Q4_KHandBuilt) {
  std::vector<uint8_t> b(144);
  put16(b.data(), 0x3C00);      // d = 1
  put16(b.data() + 2, 0x3800);  // dmin = 0.5
  k_scales(b.data() + 4);
  for (int k = 0; k < 128; ++k) b[16 + k] = static_cast<uint8_t>(k);
  const auto y = deq(GgmlType::Q4_K, b, 256);
  // Element e: chunk c = e/64, nibble h = e%64/32, l = e%32, sub-block 2c+h,
  // code = nibble h of qs[32c + l] (= 32c + l).
  EXPECT_EQ(y[0], 0.f);      // sc 1, q 0, m 0
  EXPECT_EQ(y[1], 1.f);      // q 1
  EXPECT_EQ(y[33], -0.5f);   // sub-block 1: high nibble of 1 = 0; 2·0 − 0.5·1
  EXPECT_EQ(y[48], 1.5f);    // high nibble of 16 = 1: 2·1 − 0.5
  EXPECT_EQ(y[113], 10.5f);  // sub-block 3, qs[49] = 49 -> high 3: 4·3 − 1.5
  EXPECT_EQ(y[165], 145.5f); // sub-block 5, qs[69] -> high 4: 37·4 − 2.5
  EXPECT_EQ(y[195], 15.f);   // sub-block 6, qs[99] -> low 3: 6·3 − 3
  EXPECT_EQ(y[255], 37.5f);  // sub-block 7, qs[127] -> high 7: 7·7 − 11.5
}

TEST(QuantBlocks, Q5_KHandBuilt) {
  std::vector<uint8_t> b(176);
  put16(b.data(), 0x3C00);
  put16(b.data() + 2, 0x3800);
  k_scales(b.data() + 4);
  b[16 + 5] = 1 << 5;   // qh[5] bit 5: fifth bit of element l = 5 of sub-block 5
  b[16 + 31] = 0x80;    // qh[31] bit 7: element l = 31 of sub-block 7
  for (int k = 0; k < 128; ++k) b[48 + k] = static_cast<uint8_t>(k);
  const auto y = deq(GgmlType::Q5_K, b, 256);
  EXPECT_EQ(y[1], 1.f);
  EXPECT_EQ(y[5], 5.f);        // sub-block 0: bit 0 of qh[5] is clear
  EXPECT_EQ(y[165], 737.5f);   // 37·(4 + 16) − 2.5
  EXPECT_EQ(y[255], 149.5f);   // 7·(7 + 16) − 11.5
  EXPECT_EQ(y[223], 87.f);      // l = 31 of sub-block 6 (bit 6 clear): 6·15 − 3
}

TEST(QuantBlocks, Q6_KHandBuilt) {
  std::vector<uint8_t> b(210);
  for (int k = 0; k < 128; ++k) b[k] = static_cast<uint8_t>(k);          // ql
  for (int k = 0; k < 64; ++k) b[128 + k] = 0xE4;                        // qh: 0,1,2,3 per 2 bits
  for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(j - 8);  // scales -8..7
  put16(b.data() + 208, 0x3800);  // d = 0.5
  const auto y = deq(GgmlType::Q6_K, b, 256);
  // n = 128h + 32k + l: low 4 bits from ql[64h + l + 32(k&1)] (low nibble for
  // k < 2), high 2 bits = bits 2k..2k+1 of qh[32h + l] (= k here), scale n/16.
  EXPECT_EQ(y[0], 128.f);    // q 0: 0.5·(−8)·(0 − 32)
  EXPECT_EQ(y[33], 45.f);    // ql[33] low 1, high 1: q 17; scale −6
  EXPECT_EQ(y[71], 0.f);     // ql[7] high 0, high bits 2: q 32
  EXPECT_EQ(y[116], -9.5f);  // ql[52] high 3, high bits 3: q 51; scale −1
  EXPECT_EQ(y[133], 0.f);    // scale 0
  EXPECT_EQ(y[255], 80.5f);  // ql[127] high 7, high bits 3: q 55; scale 7
}

TEST(QuantBlocks, RefusesPartialBlocksAndUnknownTypes) {
  std::vector<float> x(48), y(48);
  std::vector<uint8_t> b(1024);
  EXPECT_THROW(quantize_row(GgmlType::Q8_0, x.data(), 48, b.data()), ShapeError);
  EXPECT_THROW(dequantize_row(GgmlType::Q4_K, b.data(), 32, y.data()), ShapeError);
  EXPECT_THROW(dequantize_row(GgmlType::Q2_K, b.data(), 256, y.data()), ShapeError);
}

// Test data: normal values with an outlier, plus blocks that are all zero,
// all positive, all negative and constant.
std::vector<float> test_row(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  x[3] = 9.f;
  for (size_t i = 256; i < 288 && i < n; ++i) x[i] = 0;
  for (size_t i = 288; i < 320 && i < n; ++i) x[i] = std::fabs(x[i]) + 1.f;
  for (size_t i = 320; i < 352 && i < n; ++i) x[i] = -std::fabs(x[i]) - 0.5f;
  for (size_t i = 352; i < 384 && i < n; ++i) x[i] = 0.25f;
  return x;
}

// The documented bound (quant_blocks.h) of element i, from the input alone.
float bound(GgmlType t, const float* x, size_t i) {
  auto amax = [&](size_t b0, size_t n) {
    float a = 0;
    for (size_t k = b0; k < b0 + n; ++k) a = std::max(a, std::fabs(x[k]));
    return a;
  };
  const float up = 1 + 0x1p-10f;  // fp16 rounding of a scale
  switch (t) {
    case GgmlType::Q8_0: return 0.5f * amax(i / 32 * 32, 32) / 127.f * up;
    case GgmlType::Q4_0: return amax(i / 32 * 32, 32) / 8.f * up;
    case GgmlType::Q5_0: return amax(i / 32 * 32, 32) / 16.f * up;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: {  // d/2, d = (max − m)/L rounded up, m <= min by one fp16 step
      const size_t b0 = i / 32 * 32;
      float mn = x[b0], mx = x[b0];
      for (size_t k = b0; k < b0 + 32; ++k) mn = std::min(mn, x[k]), mx = std::max(mx, x[k]);
      const float L = t == GgmlType::Q4_1 ? 15.f : 31.f;
      return (mx - mn + std::fabs(mn) * 0x1p-10f + 0x1p-24f) / (2 * L) * up;
    }
    case GgmlType::Q6_K: {
      const size_t sb = i / 256 * 256;
      float smax = 0;
      for (size_t j = 0; j < 16; ++j) smax = std::max(smax, amax(sb + 16 * j, 16) / 31.f);
      return amax(i / 16 * 16, 16) / 62.f * up + 0.5f * smax / 127.f * up * up;
    }
    default: {  // Q4_K, Q5_K
      const float L = t == GgmlType::Q4_K ? 15.f : 31.f;
      const size_t sb = i / 256 * 256;
      float mn[8], mx[8], maxneg = 0;
      for (size_t j = 0; j < 8; ++j) {
        mn[j] = 0, mx[j] = x[sb + 32 * j];
        for (size_t k = 0; k < 32; ++k)
          mn[j] = std::min(mn[j], x[sb + 32 * j + k]), mx[j] = std::max(mx[j], x[sb + 32 * j + k]);
        maxneg = std::max(maxneg, -mn[j]);
      }
      const float dmin = maxneg / 63.f * up;
      float d = 0;
      for (size_t j = 0; j < 8; ++j) d = std::max(d, (mx[j] - mn[j] + dmin) / L / 63.f * up);
      const size_t j = (i - sb) / 32;
      return (mx[j] - mn[j] + dmin) / (2 * L) + d / 2;
    }
  }
}

TEST(QuantBlocks, QuantizeWithinDocumentedBound) {
  std::mt19937 rng(7);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_1,
                     GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const size_t n = 512;
    for (int rep = 0; rep < 20; ++rep) {
      auto x = test_row(n, rng);
      std::vector<uint8_t> b(ggml_row_bytes(static_cast<uint32_t>(t), n));
      quantize_row(t, x.data(), n, b.data());
      std::vector<float> y(n);
      dequantize_row(t, b.data(), n, y.data());
      for (size_t i = 0; i < n; ++i) {
        // + fp32 rounding of the dequantizer's d·sc·q − m (a few ulps of amax)
        const float tol = bound(t, x.data(), i) * (1 + 1e-5f) + 1e-6f * 9.f;
        ASSERT_LE(std::fabs(y[i] - x[i]), tol)
            << ggml_type_name(static_cast<uint32_t>(t)) << " rep " << rep << " i " << i
            << " x " << x[i] << " y " << y[i];
        if (i >= 256 && i < 288) ASSERT_EQ(y[i], 0.f) << "zero block";
      }
    }
  }
}

// find_nonfinite_scale against the dequantizer: a NaN or ±Inf in any scale
// field (offsets from ggml's layouts above) makes the dequantized block
// non-finite and is found at its row and block; the largest finite fp16 in
// every field keeps every value finite and is not reported.
TEST(QuantBlocks, NonFiniteScalesFoundWhereDequantizingSaysSo) {
  struct Field { GgmlType t; size_t at; const char* name; };
  const Field fields[] = {
      {GgmlType::Q8_0, 0, "d"},   {GgmlType::Q4_0, 0, "d"},    {GgmlType::Q5_0, 0, "d"},
      {GgmlType::Q4_1, 0, "d"},   {GgmlType::Q4_1, 2, "m"},    {GgmlType::Q5_1, 0, "d"},
      {GgmlType::Q5_1, 2, "m"},   {GgmlType::Q4_K, 0, "d"},    {GgmlType::Q4_K, 2, "dmin"},
      {GgmlType::Q5_K, 0, "d"},   {GgmlType::Q5_K, 2, "dmin"}, {GgmlType::Q6_K, 208, "d"}};
  std::mt19937 rng(11);
  const size_t n = 512, rows = 3;
  for (const Field& f : fields) {
    const auto ty = static_cast<uint32_t>(f.t);
    const size_t rb = ggml_row_bytes(ty, n), bb = ggml_type_info(ty).block_bytes;
    const size_t be = ggml_type_info(ty).block_elems;
    std::vector<uint8_t> b(rows * rb);
    for (size_t r = 0; r < rows; ++r) quantize_row(f.t, test_row(n, rng).data(), n, &b[r * rb]);
    EXPECT_FALSE(find_nonfinite_scale(f.t, b.data(), rows, n).has_value()) << ty;
    for (uint16_t h : {uint16_t(0x7E00), uint16_t(0x7C00), uint16_t(0xFC00), uint16_t(0x7BFF)}) {
      auto bad = b;
      bad[2 * rb + bb + f.at] = uint8_t(h & 0xFF);  // row 2, block 1
      bad[2 * rb + bb + f.at + 1] = uint8_t(h >> 8);
      std::vector<float> y(n);
      dequantize_row(f.t, &bad[2 * rb], n, y.data());
      bool finite_block = true;
      for (size_t i = 0; i < n; ++i) {
        if (i / be != 1) ASSERT_TRUE(std::isfinite(y[i])) << i;
        else finite_block = finite_block && std::isfinite(y[i]);
      }
      const auto found = find_nonfinite_scale(f.t, bad.data(), rows, n);
      ASSERT_EQ(found.has_value(), !finite_block) << ggml_type_name(ty) << " " << f.name << " " << h;
      EXPECT_EQ(finite_block, h == 0x7BFF) << ggml_type_name(ty) << " " << f.name;
      if (found) {
        EXPECT_EQ(found->row, 2u);
        EXPECT_EQ(found->block, 1u);
        EXPECT_STREQ(found->field, f.name);
      }
    }
  }
}

}  // namespace
}  // namespace mtp::kernels
