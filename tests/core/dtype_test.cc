// Storage-type conversions against independent references: the CPU's F16C
// instructions for fp16, and bit manipulation identities for bf16.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.h"
#include "core/error.h"

namespace mtp {
namespace {

__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

bool has_f16c() { return __builtin_cpu_supports("f16c"); }

TEST(DType, F16MatchesHardwareForAllHalfValues) {
  if (!has_f16c()) GTEST_SKIP() << "CPU has no F16C";
  for (uint32_t h = 0; h < 65536; ++h) {
    float a = f16_to_f32(uint16_t(h)), b = hw_f16_to_f32(uint16_t(h));
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a));
      continue;
    }
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "half 0x" << std::hex << h;
  }
}

TEST(DType, F32ToF16MatchesHardwareRounding) {
  if (!has_f16c()) GTEST_SKIP() << "CPU has no F16C";
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << "f32 bits 0x" << std::hex << u;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between two bf16 values: rounds to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // Slightly above halfway rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  // 1 + 3·2^-8 is halfway between 0x3f81 and 0x3f82: rounds to even (0x3f82).
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, NamesRoundTripAndUnknownIsAnError) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8}) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_THROW(dtype_from_name("F8_E4M3"), FormatError);
}

}  // namespace
}  // namespace mtp
