#include "sparse/token_layout.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace vidax::sparse {

std::string BlockShape::str() const {
  // Appends rather than "(" + ...: GCC 12 reports a false -Wrestrict on the latter.
  std::string s = "(";
  s += std::to_string(t);
  s += ',';
  s += std::to_string(h);
  s += ',';
  s += std::to_string(w);
  s += ')';
  return s;
}

void validate_grid(const TokenGrid& g, const char* what) {
  if (g.frames <= 0 || g.height <= 0 || g.width <= 0)
    throw InputError(std::string(what) + ": token grid must be positive, got " +
                     std::to_string(g.frames) + "x" + std::to_string(g.height) + "x" +
                     std::to_string(g.width));
  if (g.tokens() > std::numeric_limits<int32_t>::max())
    throw InputError(std::string(what) + ": " + std::to_string(g.tokens()) +
                     " tokens exceed the 2^31 - 1 a layout can index");
}

std::array<int64_t, 3> token_coords(const TokenGrid& g, int64_t n) {
  const int64_t hw = g.height * g.width;
  return {n / hw, (n % hw) / g.width, n % g.width};
}

TokenLayout frame_major_layout(const TokenGrid& grid, int64_t block_tokens) {
  validate_grid(grid, "frame-major layout");
  TokenLayout l;
  l.blocks = BlockPartition::uniform(grid.tokens(), block_tokens);
  return l;
}

TokenLayout token_major_layout(const TokenGrid& grid, int64_t block_tokens) {
  validate_grid(grid, "token-major layout");
  TokenLayout l;
  const int64_t hw = grid.height * grid.width;
  l.perm.resize(static_cast<size_t>(grid.tokens()));
  // Position (s * F + f) holds frame-major token (f * HW + s): one spatial site's frames in a row.
  for (int64_t s = 0; s < hw; ++s)
    for (int64_t f = 0; f < grid.frames; ++f)
      l.perm[static_cast<size_t>(s * grid.frames + f)] = static_cast<int32_t>(f * hw + s);
  l.blocks = BlockPartition::uniform(grid.tokens(), block_tokens);
  return l;
}

TokenLayout block3d_layout(const TokenGrid& grid, const BlockShape& shape) {
  validate_grid(grid, "3D block layout");
  if (shape.t <= 0 || shape.h <= 0 || shape.w <= 0)
    throw InputError("3D block layout: block shape must be positive, got " + shape.str());
  TokenLayout l;
  l.block_shape = shape;
  const int64_t nt = (grid.frames + shape.t - 1) / shape.t;
  const int64_t nh = (grid.height + shape.h - 1) / shape.h;
  const int64_t nw = (grid.width + shape.w - 1) / shape.w;
  l.block_grid = {nt, nh, nw};
  l.perm.reserve(static_cast<size_t>(grid.tokens()));
  l.blocks.offsets.push_back(0);
  for (int64_t bt = 0; bt < nt; ++bt)
    for (int64_t bh = 0; bh < nh; ++bh)
      for (int64_t bw = 0; bw < nw; ++bw) {
        const int64_t f1 = std::min(grid.frames, (bt + 1) * shape.t);
        const int64_t y1 = std::min(grid.height, (bh + 1) * shape.h);
        const int64_t x1 = std::min(grid.width, (bw + 1) * shape.w);
        for (int64_t f = bt * shape.t; f < f1; ++f)
          for (int64_t y = bh * shape.h; y < y1; ++y)
            for (int64_t x = bw * shape.w; x < x1; ++x)
              l.perm.push_back(static_cast<int32_t>((f * grid.height + y) * grid.width + x));
        l.blocks.offsets.push_back(static_cast<int64_t>(l.perm.size()));
      }
  return l;
}

std::vector<int32_t> inverse_permutation(const std::vector<int32_t>& perm) {
  std::vector<int32_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int32_t>(i);
  return inv;
}

}  // namespace vidax::sparse
