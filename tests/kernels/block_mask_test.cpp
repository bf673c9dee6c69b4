#include "kernels/cpu/block_mask.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"

namespace vidax {
namespace {

TEST(BlockPartition, UniformHasARaggedLastBlock) {
  const auto p = BlockPartition::uniform(10, 4);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 4, 8, 10}));
  EXPECT_EQ(p.blocks(), 3);
  EXPECT_EQ(p.size(2), 2);
  EXPECT_EQ(p.max_block(), 4);
  EXPECT_THROW(BlockPartition::uniform(0, 4), InputError);
  EXPECT_THROW(BlockPartition::uniform(4, 0), InputError);
}

TEST(BlockPartition, ValidateRejectsEmptyBlocks) {
  BlockPartition p{{0, 3, 3, 5}};
  EXPECT_THROW(p.validate("test"), InputError);
  BlockPartition q{{1, 3}};
  EXPECT_THROW(q.validate("test"), InputError);
  BlockPartition ok{{0, 3, 5}};
  EXPECT_NO_THROW(ok.validate("test"));
}

// Rows built by bit iteration list exactly the tiles set, in order, with their class; checked
// against a plain dictionary on random masks wider than one 64-bit word.
TEST(BlockMask, RowsMatchTheTilesSet) {
  std::mt19937 rng(7);
  for (int64_t kblocks : {1, 63, 64, 65, 130}) {
    BlockMask m(3, 5, kblocks);
    std::vector<TileClass> truth(static_cast<size_t>(3 * 5 * kblocks), TileClass::kSkip);
    for (int i = 0; i < 400; ++i) {
      const int64_t h = rng() % 3, qb = rng() % 5, kb = rng() % kblocks;
      const auto c = static_cast<TileClass>(rng() % 3);
      m.set(h, qb, kb, c);
      truth[static_cast<size_t>((h * 5 + qb) * kblocks + kb)] = c;
    }
    m.build_rows();
    int64_t active = 0;
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t qb = 0; qb < 5; ++qb) {
        const auto row = m.row(h, qb);
        size_t j = 0;
        for (int64_t kb = 0; kb < kblocks; ++kb) {
          const TileClass c = truth[static_cast<size_t>((h * 5 + qb) * kblocks + kb)];
          EXPECT_EQ(m.get(h, qb, kb), c);
          if (c == TileClass::kSkip) continue;
          ++active;
          ASSERT_LT(j, row.key_blocks.size());
          EXPECT_EQ(row.key_blocks[j], kb);
          EXPECT_EQ(row.boundary[j], c == TileClass::kBoundary ? 1 : 0);
          ++j;
        }
        EXPECT_EQ(j, row.key_blocks.size());
      }
    EXPECT_EQ(m.active_tiles(), active);
  }
}

// set_full_bits equals set(..., kFull) for every set bit, over a mask with all three classes
// already present (FULL stays, SKIP and BOUNDARY under a bit become FULL, others untouched).
TEST(BlockMask, SetFullBitsEqualsSetPerBit) {
  std::mt19937 rng(9);
  for (int64_t kblocks : {1, 63, 64, 65, 130}) {
    const int64_t words = (kblocks + 63) / 64;
    BlockMask a(2, 4, kblocks), b(2, 4, kblocks);
    for (int i = 0; i < 200; ++i) {
      const int64_t h = rng() % 2, qb = rng() % 4, kb = rng() % kblocks;
      const auto c = static_cast<TileClass>(rng() % 3);
      a.set(h, qb, kb, c);
      b.set(h, qb, kb, c);
    }
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t qb = 0; qb < 4; ++qb) {
        std::vector<uint64_t> bits(static_cast<size_t>(words), 0);
        for (int64_t kb = 0; kb < kblocks; ++kb)
          if (rng() % 2) {
            bits[static_cast<size_t>(kb / 64)] |= uint64_t{1} << (kb % 64);
            a.set(h, qb, kb, TileClass::kFull);
          }
        b.set_full_bits(h, qb, bits.data());
      }
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t qb = 0; qb < 4; ++qb)
        for (int64_t kb = 0; kb < kblocks; ++kb)
          ASSERT_EQ(a.get(h, qb, kb), b.get(h, qb, kb))
              << kblocks << " " << h << " " << qb << " " << kb;
  }
}

TEST(BlockMask, DensityWeighsRaggedBlocks) {
  const auto p = BlockPartition::uniform(10, 4);  // blocks of 4, 4, 2
  BlockMask m(1, 3, 3);
  EXPECT_DOUBLE_EQ(m.density(p, p), 0.0);
  m.set(0, 2, 2, TileClass::kFull);  // 2 x 2 pairs
  EXPECT_DOUBLE_EQ(m.density(p, p), 4.0 / 100.0);
  m.fill(TileClass::kBoundary);
  EXPECT_DOUBLE_EQ(m.density(p, p), 1.0);
  EXPECT_THROW(BlockMask(0, 1, 1), InputError);
}

}  // namespace
}  // namespace vidax
