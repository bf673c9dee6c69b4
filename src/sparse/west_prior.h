// ScalingAttention's WEST prior (Weight-Encoded Sparse Topology): for every (layer, head), the
// attention mass that queries in each cell of a normalized block grid (gt x gh x gw cells over
// frames x height x width, whatever the resolution) give to each cell, averaged over calibration
// prompts, steps and CFG branches. It is accumulated from dense calls (WestAccumulator), stored
// in a `.west` file, and resampled onto any run-time grid by mapping each block's centre to its
// cell, so a run never searches.
//
// File format (little-endian), validated strictly on load:
//   bytes 0..7    "VIDAXWST"
//   bytes 8..15   u64 N: length of the JSON header that follows
//   N bytes       JSON object: {"format": "vidax-west", "version": 1, "layers": L, "heads": H,
//                 "grid": [gt, gh, gw], "dtype": "F32", "calibration": {...free-form...}}
//   L*H*C*C f32   mass[layer][head][query cell][key cell], C = gt*gh*gw; every row is in [0, 1]
//                 and sums to 1 (within 1e-3); nothing may follow.
//
// WestPrior is a value type; WestAccumulator serves one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sparse/attention_policy.h"

namespace vidax::sparse {

struct WestPrior {
  int64_t layers = 0, heads = 0;
  std::array<int64_t, 3> grid{4, 4, 4};  // cells along frames, height, width
  std::vector<float> mass;               // [layers, heads, cells, cells]
  std::string calibration = "{}";        // JSON text carried in the header (provenance)

  int64_t cells() const { return grid[0] * grid[1] * grid[2]; }
  const float* row(int64_t layer, int64_t head, int64_t qcell) const {
    return mass.data() + ((layer * heads + head) * cells() + qcell) * cells();
  }
};

// Writes atomically; InputError naming the path on I/O failure.
void write_west_prior(const std::string& path, const WestPrior& prior);
// InputError naming the path and what is wrong on any malformed, truncated or inconsistent file.
WestPrior read_west_prior(const std::string& path);

// Cell of frame-major token `n` of `grid` on the normalized `cells` grid.
int64_t west_token_cell(const TokenGrid& grid, const std::array<int64_t, 3>& cells, int64_t n);
// Cell of a 3D block (of a block3d layout) by its centre.
int64_t west_block_cell(const TokenGrid& grid, const std::array<int64_t, 3>& cells,
                        const TokenLayout& layout, int64_t block);

// Sums attention mass per (layer, head, query cell, key cell) from the q/k of dense calls.
class WestAccumulator {
 public:
  // samples: query rows per (call, head) drawn with a seeded generator; 0 = every row.
  WestAccumulator(std::array<int64_t, 3> cells, int64_t samples, uint64_t seed);
  void add(const AttentionCall& call);
  int64_t calls() const { return calls_; }
  // Row-normalized prior; rows no sampled query fell in are uniform.
  WestPrior prior(const std::string& calibration_json = "{}") const;

 private:
  std::array<int64_t, 3> cells_;
  int64_t samples_;
  uint64_t seed_;
  int64_t layers_ = 0, heads_ = 0, calls_ = 0;
  std::vector<double> sum_;     // [layers, heads, cells, cells]
  std::vector<int64_t> count_;  // [layers, heads, cells]
};

}  // namespace vidax::sparse
