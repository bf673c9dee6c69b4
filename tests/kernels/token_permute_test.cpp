// Gather / scatter of attention rows: against plain index arithmetic, and round trips
// (gather then scatter restores the selected heads, leaves the others alone) on ragged sizes.
#include "kernels/cpu/token_permute.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "support/test_support.h"

namespace vidax {
namespace {

std::vector<int32_t> random_perm(int64_t n, uint32_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

struct PermCase {
  int64_t tokens, heads, head_dim, extra;  // extra: stride padding per row
  std::vector<int64_t> group;
  bool identity;
};

TEST(TokenPermute, GatherMatchesIndexArithmeticAndScatterInverts) {
  const PermCase cases[] = {{1, 1, 1, 0, {0}, false},
                            {7, 3, 5, 2, {2, 0}, false},
                            {33, 4, 16, 9, {1, 3}, true},
                            {130, 12, 128, 0, {5}, false},
                            {257, 6, 40, 3, {0, 1, 2, 3, 4, 5}, false}};
  uint32_t seed = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "tokens " << c.tokens << " heads " << c.heads << " hd " << c.head_dim);
    const int64_t stride = c.heads * c.head_dim + c.extra, gh = c.group.size(), hd = c.head_dim;
    const auto src = testing::random_floats(static_cast<size_t>(c.tokens * stride), seed++);
    const auto perm = c.identity ? std::vector<int32_t>{} : random_perm(c.tokens, seed++);
    const StridedRows rows{src.data(), c.tokens, c.heads, hd, stride};
    std::vector<float> g(static_cast<size_t>(c.tokens * gh * hd));
    gather_token_heads(rows, perm, c.group, g.data());
    std::vector<BFloat16> g16(g.size());
    gather_token_heads(rows, perm, c.group, g16.data());
    // From a bf16 copy of the source: the same bf16 rows.
    std::vector<BFloat16> src16(src.size()), from16(g.size());
    convert_floats_reference(src.data(), DType::kF32, src16.data(), DType::kBF16, src.size());
    gather_token_heads(StridedRowsBf16{src16.data(), c.tokens, c.heads, hd, stride}, perm, c.group,
                       from16.data());
    for (size_t e = 0; e < g16.size(); ++e) ASSERT_EQ(from16[e].bits, g16[e].bits) << e;
    for (int64_t i = 0; i < c.tokens; ++i)
      for (int64_t j = 0; j < gh; ++j)
        for (int64_t e = 0; e < hd; ++e) {
          const int64_t t = c.identity ? i : perm[static_cast<size_t>(i)];
          const float want = src[static_cast<size_t>(t * stride + c.group[j] * hd + e)];
          const size_t at = static_cast<size_t>((i * gh + j) * hd + e);
          ASSERT_EQ(g[at], want) << i << "," << j << "," << e;
          BFloat16 w16;
          convert_floats_reference(&want, DType::kF32, &w16, DType::kBF16, 1);
          ASSERT_EQ(g16[at].bits, w16.bits);
        }
    // Scatter into a buffer prefilled with a marker: the group's heads come back, nothing else
    // is written.
    std::vector<float> back(src.size(), -7.0f);
    scatter_token_heads(g.data(), c.tokens, hd, perm, c.group, back.data(), stride, c.heads);
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t e = 0; e < stride; ++e) {
        const int64_t h = e / hd;
        const bool selected =
            e < c.heads * hd && std::find(c.group.begin(), c.group.end(), h) != c.group.end();
        const size_t at = static_cast<size_t>(t * stride + e);
        ASSERT_EQ(back[at], selected ? src[at] : -7.0f) << t << "," << e;
      }
  }
}

TEST(TokenPermute, BadInputIsAnInternalError) {
  std::vector<float> src(4 * 2 * 3), dst(4 * 3);
  const StridedRows rows{src.data(), 4, 2, 3, 6};
  const std::vector<int64_t> h0{0}, h9{9};
  const std::vector<int32_t> short_perm{0, 1}, bad_perm{0, 1, 2, 4};
  EXPECT_THROW(gather_token_heads(rows, short_perm, h0, dst.data()), InternalError);
  EXPECT_THROW(gather_token_heads(rows, bad_perm, h0, dst.data()), InternalError);
  EXPECT_THROW(gather_token_heads(rows, {}, h9, dst.data()), InternalError);
  EXPECT_THROW(gather_token_heads(StridedRows{src.data(), 4, 2, 3, 5}, {}, h0, dst.data()),
               InternalError);
  EXPECT_THROW(scatter_token_heads(dst.data(), 4, 3, bad_perm, h0, src.data(), 6, 2),
               InternalError);
}

}  // namespace
}  // namespace vidax
