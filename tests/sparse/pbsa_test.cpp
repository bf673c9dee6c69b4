// PBSA's pieces (sparse/pbsa.h): the block mask keeps every "always" block for every query
// block and, per head and query block, exactly the ceil(density x n) other blocks a brute-force
// ranking of mean-pooled scores picks; the sampled key mass is each sampled row's softmax summed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/convert.h"
#include "sparse/pbsa.h"
#include "support/test_support.h"

namespace vidax::sparse {
namespace {

TEST(PbsaMask, KeepsAlwaysBlocksAndTheBestOthersPerHead) {
  const int64_t heads = 2, hd = 8, q_rows = 10, keys = 37;
  const std::vector<float> q = vidax::testing::random_floats(q_rows * heads * hd, 1);
  const std::vector<float> k = vidax::testing::random_floats(keys * heads * hd, 2);
  // Ragged key blocks: two always (a sink and the chunk's own rows), five to choose from.
  std::vector<PbsaKeyBlock> kb = {{0, 4, true},   {4, 5, false},  {9, 7, false}, {16, 3, false},
                                  {19, 6, false}, {25, 2, false}, {27, 10, true}};
  const BlockPartition qp = BlockPartition::uniform(q_rows, 4);
  for (double density : {0.0, 0.3, 0.5, 1.0}) {
    const BlockMask m =
        pbsa_mask(q.data(), heads * hd, qp, k.data(), heads * hd, kb, heads, hd, density);
    const auto keep = static_cast<size_t>(std::ceil(density * 5 - 1e-9));
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t qb = 0; qb < qp.blocks(); ++qb) {
        std::vector<std::pair<float, int64_t>> scored;
        for (int64_t b = 0; b < static_cast<int64_t>(kb.size()); ++b) {
          if (kb[static_cast<size_t>(b)].always) {
            EXPECT_EQ(m.get(h, qb, b), TileClass::kFull);
            continue;
          }
          float dot = 0;
          for (int64_t d = 0; d < hd; ++d) {
            float qm = 0, km = 0;
            for (int64_t r = qp.begin(qb); r < qp.begin(qb) + qp.size(qb); ++r)
              qm += q[static_cast<size_t>((r * heads + h) * hd + d)];
            const PbsaKeyBlock& b2 = kb[static_cast<size_t>(b)];
            for (int64_t r = b2.begin; r < b2.begin + b2.rows; ++r)
              km += k[static_cast<size_t>((r * heads + h) * hd + d)];
            dot += qm * (km / static_cast<float>(b2.rows));
          }
          scored.push_back({dot, b});
        }
        std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
          return a.first != b.first ? a.first > b.first : a.second < b.second;
        });
        for (size_t i = 0; i < scored.size(); ++i)
          EXPECT_EQ(m.get(h, qb, scored[i].second), i < keep ? TileClass::kFull : TileClass::kSkip)
              << "density " << density << " head " << h << " q block " << qb;
      }
  }
}

TEST(PbsaMass, EachSampledRowAddsOneDistributionPerHead) {
  const int64_t heads = 3, hd = 16, q_rows = 9, keys = 20;
  const std::vector<float> q = vidax::testing::random_floats(q_rows * heads * hd, 3);
  const std::vector<float> k = vidax::testing::random_floats(keys * heads * hd, 4);
  std::vector<double> mass(keys, 0.0);
  sampled_key_mass(q.data(), heads * hd, q_rows, k.data(), heads * hd, keys, heads, hd, 0.25f, 4,
                   mass.data());
  EXPECT_NEAR(std::accumulate(mass.begin(), mass.end(), 0.0), 4.0 * heads, 1e-9);
  // The bf16 keys give the same up to their rounding.
  std::vector<BFloat16> k16(k.size());
  convert_floats(k.data(), DType::kF32, k16.data(), DType::kBF16, k.size());
  std::vector<double> mass16(keys, 0.0);
  sampled_key_mass(q.data(), heads * hd, q_rows, k16.data(), heads * hd, keys, heads, hd, 0.25f, 4,
                   mass16.data());
  for (int64_t j = 0; j < keys; ++j) EXPECT_NEAR(mass16[j], mass[j], 2e-2);
}

}  // namespace
}  // namespace vidax::sparse
