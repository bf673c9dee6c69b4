// ScalingAttention (WEST + FAST) at run time, and the recorder `vidax calibrate` runs.
//
// WestPolicy loads a WEST prior (west_prior.h) and decides, once at load, which cell pairs each
// (layer, head) keeps — FAST (Fidelity-Aware Sensitivity Tuning):
//   - budget=e: per head and query cell, the fewest key cells (by descending prior mass) whose
//     mass reaches 1 - e, so each head's estimated dropped attention stays under e: heads with
//     concentrated attention end up sparse, diffuse heads dense;
//   - density=d: one global threshold on prior mass across all layers and heads, set so that a
//     share d of all cell pairs is kept: the pairs with the most mass win, wherever they are
//     (the least total dropped mass for that density).
// The query cell's own cell is always kept. plan() only resamples: every 3D block of the run-time
// grid maps to the cell of its centre, and a tile is kept when its cell pair is (no search).
//
// WestRecorder plans every call dense and accumulates the block mass from the q/k it is given.
// Both serve one generation on one thread.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sparse/attention_policy.h"
#include "sparse/west_prior.h"

namespace vidax::sparse {

struct WestOptions {
  std::string path;
  double budget = 0.05;  // FAST fidelity budget (dropped mass per row); used unless density set
  double density = 0;    // > 0: global density target instead
  BlockShape block{2, 8, 8};
  int64_t dense_layers = 0;
};
// "FILE[:key=value,...]"; the options follow the last ':' whose tail holds '='.
WestOptions parse_west_options(std::string_view options);

class WestPolicy final : public AttentionPolicy {
 public:
  WestPolicy(WestOptions options, WestPrior prior);
  std::string name() const override;
  AttentionPlan plan(const AttentionCall& call) override;

  // keep[qcell * cells + kcell] of one (layer, head), FAST's choice.
  const std::vector<uint8_t>& keep(int64_t layer, int64_t head) const {
    return keep_[static_cast<size_t>(layer * prior_.heads + head)];
  }
  // Share of cell pairs kept and mean prior mass dropped per query cell, for one head.
  double head_density(int64_t layer, int64_t head) const;
  double head_dropped(int64_t layer, int64_t head) const;
  const WestPrior& prior() const { return prior_; }

 private:
  WestOptions opt_;
  WestPrior prior_;
  std::vector<std::vector<uint8_t>> keep_;                 // [layers * heads][cells * cells]
  std::map<std::array<int64_t, 4>, AttentionPlan> cache_;  // (F, H, W, layer)
};

class WestRecorder final : public AttentionPolicy {
 public:
  // Defaults: a 4x4x4 cell grid, 64 sampled query rows per (call, head) as Sparse VideoGen's
  // routing samples.
  explicit WestRecorder(std::array<int64_t, 3> cells = {4, 4, 4}, int64_t samples = 64,
                        uint64_t seed = 0)
      : acc_(cells, samples, seed) {}
  std::string name() const override { return "west-record"; }
  AttentionPlan plan(const AttentionCall& call) override;
  const WestAccumulator& accumulator() const { return acc_; }

 private:
  WestAccumulator acc_;
};

}  // namespace vidax::sparse
