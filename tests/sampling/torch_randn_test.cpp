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

namespace vidax {
namespace {

// torch.manual_seed(5); randn(3); randn(5); randn(20); randn(33), printed by PyTorch 1.13 (CPU):
// one stream across calls, the normal cached by an odd small draw carried into the next, the
// 16-wide path with and without a ragged tail.
TEST(TorchGenerator, ContinuesOneStreamAcrossCalls) {
  const std::vector<std::vector<float>> expected = {
      {-4.867807627e-01f, -6.038215756e-01f, -5.580962300e-01f},
      {6.675242782e-01f, -1.974150985e-01f, 1.942783475e+00f, -1.401702046e+00f, -7.625571489e-01f},
      {2.779863119e+00f,  1.222025275e+00f,  -3.364493549e-01f, -9.650601745e-01f,
       1.923059940e+00f,  2.879498005e-01f,  9.367964864e-01f,  -2.403135061e+00f,
       8.183425665e-01f,  -6.632770896e-01f, 2.652658224e-01f,  -1.566038489e+00f,
       -1.815305114e+00f, -2.066285908e-01f, -5.259512067e-01f, -1.697732925e+00f,
       -1.036467075e+00f, 6.704617739e-01f,  -1.777045876e-01f, 4.313727617e-01f},
      {1.730271429e-01f,  1.667671055e-01f,  -1.137243509e+00f, -8.208335042e-01f,
       9.895159602e-01f,  5.197204351e-01f,  -6.861071587e-01f, -3.713698387e-01f,
       9.906442165e-01f,  7.425893545e-01f,  1.270192146e+00f,  1.322719932e+00f,
       1.558462024e+00f,  -3.576716185e-01f, -2.505899370e-01f, -2.664200068e+00f,
       4.731220901e-01f,  -5.470504165e-01f, 4.878222942e-01f,  -6.519467235e-01f,
       -5.175644755e-01f, -7.753658295e-01f, 5.061160922e-01f,  4.817219973e-01f,
       -4.065384865e-01f, -4.743404314e-02f, 5.186306834e-01f,  6.518765092e-01f,
       1.185503721e+00f,  3.593219817e-01f,  -4.035829902e-01f, -9.048386812e-01f,
       6.527997255e-01f}};
  TorchGenerator gen(5);
  for (const auto& want : expected) {
    const Tensor got = gen.randn(Shape{static_cast<int64_t>(want.size())});
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_FLOAT_EQ(got.data<float>()[i], want[i]) << "draw of " << want.size() << ", " << i;
  }
  // Skipping a draw leaves the stream where drawing it would.
  TorchGenerator a(9), b(9);
  a.randn(Shape{37});
  b.skip_randn(37);
  EXPECT_EQ(a.randn(Shape{16}).to_float_vector(), b.randn(Shape{16}).to_float_vector());
}

}  // namespace
}  // namespace vidax
