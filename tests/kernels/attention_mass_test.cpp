// The attention-mass kernels (AVX-512 / AVX512-BF16 where present) against their plain-loop
// references on ragged random sizes.
#include "kernels/cpu/attention_mass.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"

namespace vidax {
namespace {

// The bf16 bits of x, truncated (exact values are all the test needs).
uint32_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u >> 16;
}

TEST(AttentionMass, ChunkMassMatchesReference) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::uniform_int_distribution<uint64_t> bits64;
  for (int64_t m : {1, 7, 64, 513}) {
    for (int64_t r : {1, 15, 16, 17, 70}) {
      for (int64_t sets : {1, 3, 8}) {
        const int64_t words = (r + 63) / 64;
        std::vector<float> sc(static_cast<size_t>(m * r));
        for (auto& x : sc) x = normal(gen);
        std::vector<std::vector<uint64_t>> keep(static_cast<size_t>(sets));
        std::vector<const uint64_t*> bits;
        for (auto& k : keep) {
          k.resize(static_cast<size_t>(m * words));
          for (auto& b : k) b = bits64(gen);
          bits.push_back(k.data());
        }
        auto run = [&](bool reference, std::vector<float>& mx, std::vector<float>& sum,
                       std::vector<float>& kept) {
          std::vector<float> p = sc;
          mx.assign(static_cast<size_t>(r), 0.0f);
          sum.assign(static_cast<size_t>(r), 0.0f);
          kept.assign(static_cast<size_t>(sets * r), 0.0f);
          const ChunkMassOut out{mx.data(), sum.data(), kept.data()};
          if (reference)
            chunk_attention_mass_reference(p.data(), m, r, 0.125f, bits.data(), sets, words, out);
          else
            chunk_attention_mass(p.data(), m, r, 0.125f, bits.data(), sets, words, out);
        };
        std::vector<float> mx, sum, kept, mx_r, sum_r, kept_r;
        run(false, mx, sum, kept);
        run(true, mx_r, sum_r, kept_r);
        for (int64_t i = 0; i < r; ++i) {
          const auto ui = static_cast<size_t>(i);
          EXPECT_EQ(mx[ui], mx_r[ui]) << "m " << m << " r " << r << " i " << i;
          EXPECT_NEAR(sum[ui], sum_r[ui], 1e-5f * sum_r[ui] * static_cast<float>(m));
          for (int64_t s = 0; s < sets; ++s) {
            const auto at = static_cast<size_t>(s * r + i);
            EXPECT_NEAR(kept[at], kept_r[at], 1e-5f * sum_r[ui] * static_cast<float>(m))
                << "m " << m << " r " << r << " set " << s << " i " << i;
          }
        }
      }
    }
  }
}

TEST(AttentionMass, Bf16PairScoresMatchReference) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t m : {1, 3, 4, 5, 130}) {
    for (int64_t r : {1, 16, 17, 50, 64, 65, 130}) {
      for (int64_t dpairs : {1, 3, 64}) {
        const int64_t mpad = (m + kPairScoreKeys - 1) / kPairScoreKeys * kPairScoreKeys;
        const int64_t rpad = (r + 15) / 16 * 16;
        std::vector<uint32_t> kp(static_cast<size_t>(mpad * dpairs), 0u);
        std::vector<uint32_t> qp(static_cast<size_t>(dpairs * rpad), 0u);
        auto pair = [&] { return bf16_bits(normal(gen)) | (bf16_bits(normal(gen)) << 16); };
        for (int64_t j = 0; j < m; ++j)
          for (int64_t p = 0; p < dpairs; ++p) kp[static_cast<size_t>(j * dpairs + p)] = pair();
        for (int64_t p = 0; p < dpairs; ++p)
          for (int64_t i = 0; i < r; ++i) qp[static_cast<size_t>(p * rpad + i)] = pair();
        // One guard element past the end: nothing may be written there.
        std::vector<float> sc(static_cast<size_t>(m * r) + 1, -7.0f), sc_r = sc;
        bf16_pair_scores(kp.data(), m, dpairs, qp.data(), r, sc.data());
        bf16_pair_scores_reference(kp.data(), m, dpairs, qp.data(), r, sc_r.data());
        for (size_t i = 0; i < sc.size(); ++i)
          ASSERT_NEAR(sc[i], sc_r[i], 1e-5f * static_cast<float>(2 * dpairs))
              << "m " << m << " r " << r << " dpairs " << dpairs << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace vidax
