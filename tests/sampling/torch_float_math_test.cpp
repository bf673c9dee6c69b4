#include "sampling/torch_float_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace vidax::sampling_detail {
namespace {

float f(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

constexpr float kInf = std::numeric_limits<float>::infinity();

// Inputs where SLEEF's 1-ulp functions (what torch 1.13 AVX2 uses) and glibc round differently;
// the expected bits were taken from libsleef 3.5.1 (Sleef_*f8_u10, AVX2 dispatch).
TEST(TorchFloatMath, MatchesSleefWhereLibmDiffers) {
  struct Case {
    float (*fn)(float);
    uint32_t x, expected;
  };
  const Case cases[] = {
      {torch_logf, 0x3f79dad6, 0xbcc70b4f},   {torch_logf, 0x3f42b546, 0xbe8c1f41},
      {torch_logf, 0x3f56d55b, 0xbe3385a6},   {torch_logf, 0x3f385bd5, 0xbea81627},
      {torch_expf, 0xc04cdd80, 0x3d26caba},   {torch_expf, 0xc109d204, 0x393e6880},
      {torch_expf, 0xc197c3e7, 0x31c63e54},   {torch_expf, 0xc1910822, 0x3265fd46},
      {torch_expm1f, 0xbf78bea0, 0xbf1f1d97}, {torch_expm1f, 0xbfcb77a0, 0xbf4bc607},
      {torch_expm1f, 0xbe916500, 0xbe7d258d}, {torch_expm1f, 0xbfca1ba0, 0xbf4b3747},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(bits(c.fn(f(c.x))), c.expected) << std::hex << "input 0x" << c.x;
  }
}

TEST(TorchFloatMath, SpecialValues) {
  EXPECT_EQ(torch_logf(0.0f), -kInf);
  EXPECT_EQ(torch_logf(-0.0f), -kInf);
  EXPECT_EQ(torch_logf(1.0f), 0.0f);
  EXPECT_EQ(torch_logf(kInf), kInf);
  EXPECT_TRUE(std::isnan(torch_logf(-1.0f)));
  EXPECT_TRUE(std::isnan(torch_logf(std::nanf(""))));
  EXPECT_NEAR(torch_logf(1e-40f), std::log(1e-40), 1e-5);  // subnormal input

  EXPECT_EQ(torch_expf(-kInf), 0.0f);
  EXPECT_EQ(torch_expf(0.0f), 1.0f);
  EXPECT_EQ(torch_expf(-200.0f), 0.0f);
  EXPECT_EQ(torch_expf(101.0f), kInf);
  EXPECT_EQ(torch_expf(kInf), kInf);
  EXPECT_TRUE(std::isnan(torch_expf(std::nanf(""))));

  EXPECT_EQ(torch_expm1f(-kInf), -1.0f);
  EXPECT_EQ(torch_expm1f(-20.0f), -1.0f);
  EXPECT_EQ(torch_expm1f(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(torch_expm1f(-0.0f)));
  EXPECT_EQ(torch_expm1f(kInf), kInf);
  EXPECT_TRUE(std::isnan(torch_expm1f(std::nanf(""))));
}

// One float ulp at the magnitude of v (v != 0), floored at the smallest normal's ulp.
double ulp_of(double v) {
  const int e = v == 0 ? -126 : std::max(std::ilogb(v), -126);
  return std::ldexp(1.0, e - 23);
}

// Whatever the last-bit choices, the functions must be accurate to about one ulp.
TEST(TorchFloatMath, AccurateToAboutOneUlp) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> pos(1e-6f, 4.0f), neg(-16.0f, 16.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = pos(gen);
    const double l = std::log(static_cast<double>(x));
    ASSERT_NEAR(torch_logf(x), l, 1.2 * ulp_of(l)) << x;
    const float y = neg(gen);
    const double e = std::exp(static_cast<double>(y));
    ASSERT_NEAR(torch_expf(y), e, 1.2 * ulp_of(e)) << y;
    const double m = std::expm1(static_cast<double>(y));
    ASSERT_NEAR(torch_expm1f(y), m, 1.2 * ulp_of(m)) << y;
  }
}

}  // namespace
}  // namespace vidax::sampling_detail
