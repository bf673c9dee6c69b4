#include "sampling/torch_randn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "sampling_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::count_bit_differences;

struct RandnCase {
  const char* name;
  uint64_t seed;
  Shape shape;
};

TEST(TorchRandn, BitExactAgainstPyTorch) {
  VIDAX_REQUIRE_FIXTURE(path, "randn_cpu.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(path);
  const RandnCase cases[] = {
      {"seed42.shape16_3_4_6", 42, Shape{16, 3, 4, 6}},  // vectorised, multiple of 16
      {"seed42.shape7", 42, Shape{7}},                   // scalar path, odd count
      {"seed0.shape33", 0, Shape{33}},                   // vectorised with a tail of 1
      {"seed2025.shape16_5_30_52", 2025, Shape{16, 5, 30, 52}},
      {"seed1.shape15", 1, Shape{15}},  // largest scalar-path size
      {"seed1.shape16", 1, Shape{16}},  // smallest vectorised size
      {"seed1.shape17", 1, Shape{17}},  // tail that overlaps almost the whole tensor
  };
  for (const auto& c : cases) {
    const Tensor ref = file.tensor(c.name);
    const Tensor got = torch_randn(c.seed, c.shape);
    ASSERT_EQ(got.shape(), ref.shape()) << c.name;
    EXPECT_EQ(got.dtype(), DType::kF32);
    EXPECT_EQ(count_bit_differences(got, ref), 0) << c.name << " is not bit-identical";
  }
}

TEST(TorchRandn, ShapeDoesNotChangeTheStream) {
  // torch.randn depends on numel only, not on how it is shaped.
  const Tensor a = torch_randn(123, Shape{4, 5, 6});
  const Tensor b = torch_randn(123, Shape{120});
  EXPECT_EQ(count_bit_differences(a, b), 0);
}

TEST(TorchRandn, SeedUsesLow32Bits) {
  // torch's mt19937 keeps seed & 0xffffffff.
  const uint64_t big = (uint64_t{5} << 32) | 42u;
  EXPECT_EQ(count_bit_differences(torch_randn(big, Shape{40}), torch_randn(42, Shape{40})), 0);
  EXPECT_GT(count_bit_differences(torch_randn(43, Shape{40}), torch_randn(42, Shape{40})), 0);
}

TEST(TorchRandn, EmptyAndStatistics) {
  EXPECT_EQ(torch_randn(1, Shape{0, 3}).numel(), 0);
  const Tensor t = torch_randn(7, Shape{1 << 18});
  const std::vector<float> v = t.to_float_vector();
  double sum = 0, sq = 0;
  for (float f : v) {
    ASSERT_TRUE(std::isfinite(f));
    sum += f;
    sq += static_cast<double>(f) * f;
  }
  const double mean = sum / static_cast<double>(v.size());
  const double var = sq / static_cast<double>(v.size()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.01);
}

}  // namespace
}  // namespace vidax
