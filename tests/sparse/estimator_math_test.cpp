#include "sparse/estimator_math.h"

#include <gtest/gtest.h>

#include <random>

#include "sparse/policy_options.h"
#include "sparse/policy_test_util.h"

namespace vidax::sparse {
namespace {

TEST(EstimatorMath, SampledRowsEqualTheScalarDenseRow) {
  const TokenGrid g{3, 5, 7};
  testing::CallData d(g, 3, 24);
  d.randomize(4, 2.0f);
  const std::vector<int64_t> rows{0, 104, 17, 17, 63};
  std::vector<float> probs, ref(static_cast<size_t>(g.tokens()));
  for (int64_t h = 0; h < 3; ++h) {
    sampled_attention_rows(d.call, h, rows, probs);
    ASSERT_EQ(probs.size(), rows.size() * static_cast<size_t>(g.tokens()));
    for (size_t i = 0; i < rows.size(); ++i) {
      dense_attention_row(d.call, h, rows[i], ref.data());
      for (int64_t j = 0; j < g.tokens(); ++j)
        ASSERT_NEAR(probs[static_cast<size_t>(j) * rows.size() + i], ref[static_cast<size_t>(j)],
                    2e-6)
            << "head " << h << " row " << rows[i] << " key " << j;
    }
  }
}

TEST(EstimatorMath, GemmAbtMatchesScalarOnRaggedSizes) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const auto& [m, n, k] : {std::tuple{1, 1, 1}, {7, 13, 5}, {33, 17, 129}}) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)),
        c(static_cast<size_t>(m * n));
    for (auto& v : a) v = u(rng);
    for (auto& v : b) v = u(rng);
    gemm_abt(a.data(), m, b.data(), n, k, c.data());
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int t = 0; t < k; ++t)
          s += static_cast<double>(a[static_cast<size_t>(i * k + t)]) *
               b[static_cast<size_t>(j * k + t)];
        ASSERT_NEAR(c[static_cast<size_t>(i * n + j)], s, 1e-4) << m << "x" << n << "x" << k;
      }
  }
}

}  // namespace
}  // namespace vidax::sparse
