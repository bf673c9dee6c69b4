// Token layouts for sparse attention over a latent video grid of F x H x W tokens (after the
// DiT's patch embedding). The DiT's native order is frame-major: token n = (f * H + y) * W + x.
// A layout is a permutation of that order plus a partition of the permuted sequence into
// contiguous blocks, which is what the block-sparse executor and BlockMask work on:
//   - frame-major (identity) cut into fixed-size blocks (Sparse VideoGen's spatial heads),
//   - token-major / temporal, n' = (y * W + x) * F + f, cut into fixed-size blocks (its temporal
//     heads: neighbours in time become neighbours in the sequence),
//   - 3D blocks of shape (bt, bh, bw) tiling the grid, ragged at the far edges (SPADE,
//     sliding-tile windows): blocks in raster order over the block grid, tokens raster order
//     inside each block.
// Pure functions of their arguments; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/block_mask.h"

namespace vidax::sparse {

struct TokenGrid {
  int64_t frames = 0, height = 0, width = 0;
  int64_t tokens() const { return frames * height * width; }
  bool operator==(const TokenGrid&) const = default;
};

struct BlockShape {
  int64_t t = 1, h = 1, w = 1;
  int64_t tokens() const { return t * h * w; }
  bool operator==(const BlockShape&) const = default;
  std::string str() const;  // "(1,4,16)"
};

struct TokenLayout {
  // perm[i] = frame-major index of the token at permuted position i; empty means identity.
  std::vector<int32_t> perm;
  BlockPartition blocks;  // over permuted positions
  // For 3D layouts: the block grid (blocks along t, h, w) and each block's shape (ragged at the
  // edges); empty for the 1D layouts.
  std::array<int64_t, 3> block_grid{0, 0, 0};
  BlockShape block_shape;

  bool identity() const { return perm.empty(); }
  int64_t tokens() const { return blocks.tokens(); }
  // Frame-major index of permuted position i.
  int64_t original(int64_t i) const { return perm.empty() ? i : perm[static_cast<size_t>(i)]; }
};

// Throws InputError naming `what` on non-positive sizes or sequences past int32 indexing.
void validate_grid(const TokenGrid& grid, const char* what);

TokenLayout frame_major_layout(const TokenGrid& grid, int64_t block_tokens);
TokenLayout token_major_layout(const TokenGrid& grid, int64_t block_tokens);
TokenLayout block3d_layout(const TokenGrid& grid, const BlockShape& shape);

// inverse[perm[i]] = i.
std::vector<int32_t> inverse_permutation(const std::vector<int32_t>& perm);

// (f, y, x) of frame-major token n.
std::array<int64_t, 3> token_coords(const TokenGrid& grid, int64_t n);

}  // namespace vidax::sparse
