#include "sparse/estimator_math.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "core/dtype.h"

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

// The kept mass of sampled rows against the scalar dense row on bf16-rounded q/k, summed over
// each row's key set: ragged token counts (chunk tails), several 64-row bitmap words with a
// partial last word, sampled rows repeated, and an odd head dim (a half-filled last channel
// pair on the bf16 dot-product path).
TEST(EstimatorMath, SampledMassEqualsTheScalarRowOnRoundedInputs) {
  for (const auto& [grid, rows_count, dim] :
       {std::tuple{TokenGrid{3, 5, 7}, 5, 24}, std::tuple{TokenGrid{5, 11, 13}, 70, 40},
        std::tuple{TokenGrid{2, 25, 21}, 64, 128}, std::tuple{TokenGrid{3, 9, 19}, 33, 23}}) {
    const int64_t heads = 3, n = grid.tokens();
    testing::CallData d(grid, heads, dim);
    d.randomize(9, 2.0f);
    std::vector<int64_t> rows;
    std::mt19937 rng(5);
    for (int i = 0; i < rows_count; ++i)
      rows.push_back(i == 1 ? rows[0] : static_cast<int64_t>(rng() % static_cast<uint32_t>(n)));
    const int64_t words = (rows_count + 63) / 64;
    std::vector<std::vector<uint64_t>> bits(3,
                                            std::vector<uint64_t>(static_cast<size_t>(n * words)));
    for (auto& b : bits)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < rows_count; ++i)
          if (rng() % 3 == 0) b[static_cast<size_t>(j * words + i / 64)] |= uint64_t{1} << (i % 64);
    std::vector<double> mass, portable;
    sampled_attention_mass_bf16(d.call, rows, {bits[0].data(), bits[1].data(), bits[2].data()},
                                mass);
    sampled_attention_mass_bf16(d.call, rows, {bits[0].data(), bits[1].data(), bits[2].data()},
                                portable, /*allow_fast=*/false);
    ASSERT_EQ(mass.size(), static_cast<size_t>(heads * 3 * rows_count));
    ASSERT_EQ(portable.size(), mass.size());
    // From the call's bf16 copies (what the DiT passes in bf16 mode), f32 rows NaN so they
    // cannot be read: the same masses, both paths.
    {
      std::vector<BFloat16> q16(d.q.size()), k16(d.k.size());
      for (size_t i = 0; i < d.q.size(); ++i) {
        q16[i].bits = f32_to_bf16(d.q[i]);
        k16[i].bits = f32_to_bf16(d.k[i]);
      }
      testing::CallData poisoned(grid, heads, dim);
      std::fill(poisoned.q.begin(), poisoned.q.end(), std::nanf(""));
      std::fill(poisoned.k.begin(), poisoned.k.end(), std::nanf(""));
      poisoned.call.q16 = q16.data();
      poisoned.call.k16 = k16.data();
      for (const bool fast : {true, false}) {
        std::vector<double> from16;
        sampled_attention_mass_bf16(poisoned.call, rows,
                                    {bits[0].data(), bits[1].data(), bits[2].data()}, from16, fast);
        ASSERT_EQ(from16, fast ? mass : portable) << "bf16 copies, fast path " << fast;
      }
    }
    // The reference on a copy whose q/k are rounded to bf16.
    testing::CallData r(grid, heads, dim);
    for (size_t i = 0; i < d.q.size(); ++i) {
      r.q[i] = bf16_to_f32(f32_to_bf16(d.q[i]));
      r.k[i] = bf16_to_f32(f32_to_bf16(d.k[i]));
    }
    std::vector<float> ref(static_cast<size_t>(n));
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < rows_count; ++i) {
        dense_attention_row(r.call, h, rows[static_cast<size_t>(i)], ref.data());
        for (int64_t s = 0; s < 3; ++s) {
          double want = 0;
          for (int64_t j = 0; j < n; ++j)
            if ((bits[static_cast<size_t>(s)][static_cast<size_t>(j * words + i / 64)] >>
                 (i % 64)) &
                1)
              want += ref[static_cast<size_t>(j)];
          const auto at = static_cast<size_t>((h * 3 + s) * rows_count + i);
          ASSERT_NEAR(mass[at], want, 2e-5)
              << n << " tokens, head " << h << " row " << i << " set " << s;
          ASSERT_NEAR(portable[at], want, 2e-5)
              << "portable path, " << n << " tokens, head " << h << " row " << i << " set " << s;
        }
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
