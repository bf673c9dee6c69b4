// shard_slice: which part of a declared tensor each rank of a tensor-parallel group holds.
#include "io/tensor_decl.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vidax {
namespace {

TEST(ShardSlice, ReplicatedIsWhole) {
  const TensorDecl d{"x.bias", Shape{6}, TensorRole::kVector, ShardAxis::kNone};
  for (int rank = 0; rank < 3; ++rank) {
    const ShardSlice s = shard_slice(d, rank, 3);
    EXPECT_EQ(s.dim, -1);
    EXPECT_EQ(s.shape, d.shape);
  }
}

TEST(ShardSlice, OutputSplitsRowsInRankOrder) {
  const TensorDecl w{"q.weight", Shape{8, 5}, TensorRole::kMatrix, ShardAxis::kOutput};
  const TensorDecl b{"q.bias", Shape{8}, TensorRole::kVector, ShardAxis::kOutput};
  int64_t next = 0;
  for (int rank = 0; rank < 4; ++rank) {
    const ShardSlice s = shard_slice(w, rank, 4);
    EXPECT_EQ(s.dim, 0);
    EXPECT_EQ(s.begin, next);
    EXPECT_EQ(s.length, 2);
    EXPECT_EQ(s.shape, (Shape{2, 5}));
    EXPECT_EQ(shard_slice(b, rank, 4).shape, (Shape{2}));
    next += s.length;
  }
  EXPECT_EQ(next, 8);  // the slices tile the dimension
}

TEST(ShardSlice, InputSplitsColumns) {
  const TensorDecl w{"o.weight", Shape{4, 6}, TensorRole::kMatrix, ShardAxis::kInput};
  const ShardSlice s = shard_slice(w, 2, 3);
  EXPECT_EQ(s.dim, 1);
  EXPECT_EQ(s.begin, 4);
  EXPECT_EQ(s.length, 2);
  EXPECT_EQ(s.shape, (Shape{4, 2}));
}

TEST(ShardSlice, OneRankHoldsEverything) {
  const TensorDecl w{"ffn.0.weight", Shape{6, 4}, TensorRole::kMatrix, ShardAxis::kOutput};
  const ShardSlice s = shard_slice(w, 0, 1);
  EXPECT_EQ(s.begin, 0);
  EXPECT_EQ(s.shape, w.shape);
}

TEST(ShardSlice, UnevenSplitNamesTheTensor) {
  const TensorDecl w{"blocks.0.ffn.0.weight", Shape{10, 4}, TensorRole::kMatrix,
                     ShardAxis::kOutput};
  try {
    shard_slice(w, 0, 4);
    FAIL() << "10 rows over 4 ranks must not split";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.ffn.0.weight"), std::string::npos) << e.what();
  }
  const TensorDecl v{"norm.weight", Shape{8}, TensorRole::kVector, ShardAxis::kInput};
  EXPECT_THROW(shard_slice(v, 0, 2), InputError);  // a vector has no dim 1
}

}  // namespace
}  // namespace vidax
