// Calibrating MagCache's magnitude ratios for a model without published ones (vidax-tiny,
// Wan 2.2, ...), as the reference's `magcache_calibration` does: a dense run where every call
// records mean_tokens(|r_t| / |r_prev|), the token-wise L2 norm of the block-stack residual over
// the previous call's of the same CFG branch; averaged over the calibration prompts, rounded to
// 5 decimals and led by [1, 1] for step 0. `vidax calibrate --method magcache` writes the table
// (JSON), `--accel magcache:ratios=FILE` uses it. Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

// Sums of the per-call ratios over runs: [steps][branch].
class MagRatioAccumulator {
 public:
  explicit MagRatioAccumulator(int steps);
  void add(int step, int branch, double ratio);
  int steps() const { return steps_; }
  int64_t runs() const { return runs_; }
  void end_run() { ++runs_; }
  // Interleaved [cond, uncond] per step: 1.0 for step 0, the rounded means after (1.0 where a
  // branch never ran, e.g. without guidance).
  std::vector<double> ratios() const;

 private:
  int steps_;
  int64_t runs_ = 0;
  std::vector<std::array<double, 2>> sum_;
  std::vector<std::array<int64_t, 2>> count_;
};

// The ratio of one call: mean over tokens of |residual_t| / |previous_t| (rows x dim each).
double magnitude_ratio(std::span<const float> residual, std::span<const float> previous,
                       int64_t rows, int64_t dim);

// A dense run that feeds the accumulator (the loop runs every call in full).
std::unique_ptr<StepMethod> make_magcache_calibration(const RunInfo& run,
                                                      std::shared_ptr<MagRatioAccumulator> acc);

// The table file: {"method": "magcache", "steps": N, "ratios": [...], "provenance": ...}.
void write_magcache_ratios(const std::string& path, const std::vector<double>& ratios, int steps,
                           const std::string& provenance_json);
// InputError naming the file when it cannot be read or is not such a table.
std::vector<double> read_magcache_ratios(const std::string& path);

}  // namespace vidax::accel
