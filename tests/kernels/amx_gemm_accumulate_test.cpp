// The channel-group GEMM (amx_gemm_bf16_accumulate): against the plain C++ reference on ragged
// shapes with random step masks (AMX machines), and the reference itself against a dense
// product: with every step selected it adds x . W^T; with none it leaves y alone.
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "support/test_support.h"

namespace vidax {
namespace {

struct Case {
  int64_t m, n, k;
  double density;  // share of (32-row block, K step) pairs selected
};

std::vector<BFloat16> random_bf16(size_t count, std::mt19937& rng) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<BFloat16> v(count);
  for (auto& e : v) e.bits = f32_to_bf16(d(rng));
  return v;
}

std::vector<uint8_t> random_mask(int64_t m, int64_t steps, double density, std::mt19937& rng) {
  std::bernoulli_distribution pick(density);
  std::vector<uint8_t> mask(static_cast<size_t>((m + 31) / 32 * steps));
  for (auto& e : mask) e = pick(rng) ? 1 : 0;
  return mask;
}

TEST(AmxGemmAccumulate, ReferenceAddsTheDenseProductOfTheSelectedSteps) {
  std::mt19937 rng(3);
  const int64_t m = 37, n = 45, k = 70;  // 2 row blocks, 3 K steps (the last ragged)
  const auto x = random_bf16(static_cast<size_t>(m * k), rng);
  const auto wv = random_bf16(static_cast<size_t>(n * k), rng);
  const AmxPackedWeight w(wv.data(), n, k, nullptr);
  std::vector<float> y(static_cast<size_t>(m * n), 1.5f);
  gemm_accumulate_steps_reference(x.data(), m, k, w, nullptr, y.data());
  std::vector<uint8_t> none(static_cast<size_t>(2 * 3), 0);
  std::vector<float> y2 = y;
  gemm_accumulate_steps_reference(x.data(), m, k, w, none.data(), y2.data());
  EXPECT_EQ(y2, y);
  // Steps {0} then steps {1, 2}: the same sum as all at once (within f32 rounding).
  std::vector<uint8_t> first(6, 0), rest(6, 1);
  first[0] = first[3] = 1;
  rest[0] = rest[3] = 0;
  std::vector<float> y3(static_cast<size_t>(m * n), 1.5f);
  gemm_accumulate_steps_reference(x.data(), m, k, w, first.data(), y3.data());
  gemm_accumulate_steps_reference(x.data(), m, k, w, rest.data(), y3.data());
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double dense = 1.5;
      for (int64_t kk = 0; kk < k; ++kk)
        dense += static_cast<double>(bf16_to_f32(x[static_cast<size_t>(r * k + kk)].bits)) *
                 bf16_to_f32(wv[static_cast<size_t>(c * k + kk)].bits);
      EXPECT_NEAR(y[static_cast<size_t>(r * n + c)], dense, 1e-4 * (1 + std::fabs(dense)));
      EXPECT_NEAR(y3[static_cast<size_t>(r * n + c)], dense, 1e-4 * (1 + std::fabs(dense)));
    }
}

TEST(AmxGemmAccumulate, EqualsTheReferenceOnRaggedShapes) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "AMX-BF16 is not usable on this machine (CPU or OS)";
  std::mt19937 rng(11);
  for (const Case c : {Case{1, 1, 1, 1.0}, Case{31, 33, 65, 0.5}, Case{64, 64, 64, 1.0},
                       Case{100, 70, 300, 0.3}, Case{257, 96, 128, 0.7}, Case{40, 32, 96, 0.0}}) {
    const int64_t stride = c.k + 3;  // rows wider than K
    const auto x = random_bf16(static_cast<size_t>(c.m * stride), rng);
    const auto wv = random_bf16(static_cast<size_t>(c.n * c.k), rng);
    const AmxPackedWeight w(wv.data(), c.n, c.k, nullptr);
    const auto mask = random_mask(c.m, w.k_steps(), c.density, rng);
    std::vector<float> want(static_cast<size_t>(c.m * c.n));
    std::normal_distribution<float> d(0.f, 1.f);
    for (auto& e : want) e = d(rng);
    std::vector<float> got = want;
    gemm_accumulate_steps_reference(x.data(), c.m, stride, w, mask.data(), want.data());
    amx_gemm_bf16_accumulate(x.data(), c.m, stride, w, mask.data(), got.data());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i])))
          << c.m << "x" << c.n << "x" << c.k << " at " << i;
  }
}

}  // namespace
}  // namespace vidax
