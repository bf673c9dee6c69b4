// 3D local-window attention (sliding-tile attention, the fixed form of 3D deformable slide
// attention): the latent grid is cut into 3D tiles (bt, bh, bw); a query tile attends to the key
// tiles of a (kt, kh, kw)-token neighbourhood around it, as whole FULL tiles, so no element mask
// is ever evaluated. Per axis with n tiles and a window of w = k / b tiles, query tile c keeps
// key tiles [s, s + w) with s = clamp(c - (w - 1) / 2, 0, n - w) (the window slides inside the
// grid at its edges, so every query sees w tiles; w >= n keeps the whole axis). Optionally the
// first latent frame is a sink every query attends to (tiles holding frame 0 that are outside
// the window are BOUNDARY tiles whose predicate keeps the frame-0 keys).
// See docs/sparse-attention.md for the defaults and their sources. Thread-safety: a policy
// object serves one thread at a time (it caches its last plan).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sparse/attention_policy.h"

namespace vidax::sparse {

struct WindowSpec {
  BlockShape window;         // (kt, kh, kw) latent tokens
  BlockShape tile{6, 8, 8};  // STA's tile (paper / FastVideo kernel)
  bool sink = false;
  std::string str() const;  // canonical spec, e.g. "window:18,24,24:tile=6,8,8:sink"
};

// Parses "kt,kh,kw[:tile=bt,bh,bw][:sink]". Throws InputError naming the bad part; the tile
// must divide the window along each axis.
WindowSpec parse_window_spec(std::string_view options);

// First and one-past-last key tile of query tile c on an axis of n tiles with a w-tile window.
std::pair<int64_t, int64_t> window_tile_range(int64_t c, int64_t n, int64_t w);

// The plan's one group: all heads, 3D tile layout, the window mask (and the sink predicate).
HeadGroup window_group(const TokenGrid& grid, int64_t heads, const WindowSpec& spec);

}  // namespace vidax::sparse
