// Sparse VideoGen (Xi et al., ICML 2025; svg-project/Sparse-VideoGen): every head is routed, per
// call, to one of two banded masks, whichever loses less attention on a few sampled query rows:
//   - spatial: a band around the diagonal in frame-major order (attend within nearby frames),
//   - temporal: the same band in a token-major order (attend to the same spatial site in nearby
//     frames),
// both with the first frame as a global anchor (every query attends to frame 0's keys). Temporal
// heads run on a permuted layout, so both kinds are the same banded block mask and the executor
// runs each kind as one HeadGroup. Dense warm-up for the first steps and first layers.
//
// The band is sized from a target density and rounded to whole tiles by "balanced rounding": the
// tiles of the last, partially affordable diagonal are kept or dropped evenly along it so the
// kept pair count lands within half a tile of the exact budget; every kept tile is FULL (no
// element predicate). See docs/sparse-attention.md for the defaults and where each comes from.
//
// One SvgPolicy serves one generation on one thread (it caches masks per grid).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sparse/attention_policy.h"

namespace vidax::sparse {

struct SvgOptions {
  double density = 0.25;         // kept share of (query, key) pairs, anchor included
  double warmup = 0.075;         // first share of the steps run dense
  double warmup_layers = 0.025;  // first share of the layers run dense
  int64_t samples = 64;          // sampled query rows per call for the routing
  int64_t block = 128;           // tile (block) size in tokens
  uint64_t seed = 0;             // sampling seed (mixed with layer, step, CFG branch)
  // Route once per this many steps per (layer, CFG branch) and reuse the head kinds in between
  // (1: every call, as the reference).
  int64_t route_every = 1;
};
SvgOptions parse_svg_options(std::string_view options);

// Token-major order with frame 0 first: positions [0, HW) hold frame 0 in raster order (the
// anchor), then each spatial site's frames 1..F-1 in a row: position HW + s * (F - 1) + (f - 1)
// holds frame-major token f * HW + s. With the anchor first, "attend to frame 0" is a block
// column prefix in both layouts instead of one key in every F.
TokenLayout svg_temporal_layout(const TokenGrid& grid, int64_t block);

// The banded mask of one head over `blocks` (query and key blocks alike): key blocks starting
// before `anchor_tokens` for every query block, the block diagonal, then whole block diagonals
// |qb - kb| = 1, 2, ... while they fit in round(density * tokens^2) pairs, and the last diagonal
// thinned evenly to the remaining budget.
struct SvgBand {
  BlockMask mask;              // 1 head, rows built, FULL tiles only
  int64_t full_diagonals = 0;  // diagonals kept whole (1 = only the block diagonal)
  int64_t edge_tiles = 0;      // tiles kept on the next diagonal
  int64_t budget_pairs = 0, kept_pairs = 0;
};
SvgBand svg_band_mask(const BlockPartition& blocks, int64_t anchor_tokens, double density);

class SvgPolicy final : public AttentionPolicy {
 public:
  explicit SvgPolicy(const SvgOptions& options);
  std::string name() const override;
  AttentionPlan plan(const AttentionCall& call) override;

  // Whether (layer, step) of this call falls in the dense warm-up.
  bool warm_up(const AttentionCall& call) const;
  // Sampled frame-major query rows of this call (deterministic in seed, layer, step, branch).
  std::vector<int64_t> sample_rows(const AttentionCall& call) const;
  // Routing of the last non-warm-up call: per head, the attention mass the sampled rows lose
  // under the spatial [0] and temporal [1] masks (mean over rows); kind[h] 0 spatial, 1 temporal.
  const std::vector<std::array<double, 2>>& last_errors() const { return errors_; }
  const std::vector<int>& last_kinds() const { return kinds_; }
  // Whether the last non-warm-up call routed (false: it reused an earlier step's kinds).
  bool last_routed() const { return routed_; }

  struct Masks {  // per grid: both layouts and their one-head band masks
    TokenLayout layout[2];
    SvgBand band[2];
    std::vector<int32_t> position[2];  // frame-major token -> permuted position
  };
  const Masks& masks_for(const TokenGrid& grid);

 private:
  SvgOptions opt_;
  std::map<std::array<int64_t, 3>, std::unique_ptr<Masks>> cache_;
  AttentionPlan grouped_plan(const Masks& m, int64_t heads) const;

  struct Route {
    int64_t step = 0;
    std::vector<int> kinds;
  };
  std::map<std::array<int64_t, 5>, Route> routes_;  // (layer, branch, F, H, W)
  std::vector<std::array<double, 2>> errors_;
  std::vector<int> kinds_;
  bool routed_ = false;
  // Routing scratch, reused across calls.
  std::vector<uint64_t> keep_bits_[2];  // per kind [tokens][ceil(samples / 64)]
  std::vector<double> mass_;            // [heads][2][samples]
};

}  // namespace vidax::sparse
