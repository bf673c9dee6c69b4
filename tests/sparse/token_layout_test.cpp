#include "sparse/token_layout.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"

namespace vidax::sparse {
namespace {

bool is_permutation_of_all(const std::vector<int32_t>& perm, int64_t n) {
  std::vector<int32_t> s = perm;
  std::sort(s.begin(), s.end());
  for (int64_t i = 0; i < n; ++i)
    if (s[static_cast<size_t>(i)] != i) return false;
  return static_cast<int64_t>(s.size()) == n;
}

TEST(TokenLayout, TokenMajorPutsOneSitesFramesTogether) {
  const TokenGrid g{3, 2, 5};
  const auto l = token_major_layout(g, 4);
  ASSERT_TRUE(is_permutation_of_all(l.perm, g.tokens()));
  for (int64_t i = 0; i < g.tokens(); ++i) {
    const auto c = token_coords(g, l.original(i));
    EXPECT_EQ(c[0], i % 3);             // frame varies fastest
    EXPECT_EQ(c[1] * 5 + c[2], i / 3);  // then the spatial site
  }
  EXPECT_EQ(l.blocks.blocks(), 8);  // 30 tokens in blocks of 4, last one ragged
}

// Every 3D block holds exactly the grid cells of its box (ragged at the far edges), in raster
// order, and the blocks come in raster order over the block grid.
TEST(TokenLayout, Block3dBoxesOnRaggedGrids) {
  for (const TokenGrid g : {TokenGrid{5, 7, 9}, TokenGrid{1, 4, 16}, TokenGrid{16, 3, 5}}) {
    for (const BlockShape s : {BlockShape{1, 4, 16}, BlockShape{2, 4, 8}, BlockShape{16, 1, 4}}) {
      const auto l = block3d_layout(g, s);
      ASSERT_TRUE(is_permutation_of_all(l.perm, g.tokens()));
      const int64_t nt = (g.frames + s.t - 1) / s.t, nh = (g.height + s.h - 1) / s.h,
                    nw = (g.width + s.w - 1) / s.w;
      EXPECT_EQ(l.blocks.blocks(), nt * nh * nw);
      int64_t b = 0;
      for (int64_t bt = 0; bt < nt; ++bt)
        for (int64_t bh = 0; bh < nh; ++bh)
          for (int64_t bw = 0; bw < nw; ++bw, ++b) {
            const int64_t et = std::min(s.t, g.frames - bt * s.t);
            const int64_t eh = std::min(s.h, g.height - bh * s.h);
            const int64_t ew = std::min(s.w, g.width - bw * s.w);
            ASSERT_EQ(l.blocks.size(b), et * eh * ew);
            int64_t prev = -1;
            for (int64_t i = l.blocks.begin(b); i < l.blocks.begin(b) + l.blocks.size(b); ++i) {
              const auto c = token_coords(g, l.original(i));
              EXPECT_EQ(c[0] / s.t, bt);
              EXPECT_EQ(c[1] / s.h, bh);
              EXPECT_EQ(c[2] / s.w, bw);
              EXPECT_GT(l.original(i), prev);  // raster order inside the block
              prev = l.original(i);
            }
          }
    }
  }
}

TEST(TokenLayout, InverseRoundTrips) {
  const auto l = block3d_layout(TokenGrid{3, 5, 6}, BlockShape{2, 2, 4});
  const auto inv = inverse_permutation(l.perm);
  for (size_t i = 0; i < l.perm.size(); ++i)
    EXPECT_EQ(inv[static_cast<size_t>(l.perm[i])], static_cast<int32_t>(i));
}

TEST(TokenLayout, RejectsBadSizes) {
  EXPECT_THROW(frame_major_layout(TokenGrid{0, 2, 2}, 4), InputError);
  EXPECT_THROW(block3d_layout(TokenGrid{2, 2, 2}, BlockShape{0, 1, 1}), InputError);
  EXPECT_THROW(token_major_layout(TokenGrid{2, 2, 2}, 0), InputError);
}

}  // namespace
}  // namespace vidax::sparse
