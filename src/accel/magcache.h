// MagCache for Wan (MagCache4Wan2.1, `magcache_forward`): per CFG branch, the published
// magnitude ratio of consecutive block-stack residuals is multiplied into a running ratio from
// the last computed call; while the accumulated error sum |1 - ratio| stays under the threshold
// and at most K calls were skipped in a row, the block stack is skipped and the last residual
// added (not rescaled, as the reference code). The first `retention` share of the calls always
// runs. The ratios are fixed per model, so the whole schedule is known before running (printed
// by --dry-run). Other step counts interpolate each branch's ratios by nearest index, rounding
// half to even as numpy does.
// Spec: magcache[:thresh=0.12][,k=2][,retention=0.2][,model=auto|t2v-1.3b|t2v-14b|i2v-480p|
//       i2v-720p | ,ratios=FILE (a table from vidax calibrate --method magcache)]
//       (docs/step-methods.md)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

// The published ratios of a family, interleaved [cond, uncond] per step (magcache_tables.cpp);
// nullopt when there are none.
std::optional<std::vector<double>> magcache_published_ratios(const std::string& family);

// numpy-style nearest interpolation of `src` to `n` entries: src[round(i (len-1)/(n-1))] with
// round half to even; n = 1 gives the last entry (the reference's nearest_interp).
std::vector<double> nearest_interp(const std::vector<double>& src, int n);

// The reference's schedule: per call (2 per step, cond then uncond, or 1 per step without
// guidance), whether the block stack runs. `ratios` interleaved as published (any length; it
// is interpolated to the step count when it differs).
std::vector<std::array<bool, 2>> magcache_schedule(const std::vector<double>& ratios, int steps,
                                                   int branches, double thresh, int k,
                                                   double retention);

class MagCache : public StepMethod {
 public:
  // `family`: the published table's name, or empty with `ratios_file` (a calibrated table).
  MagCache(RunInfo run, const std::vector<double>& ratios, double thresh, int k, double retention,
           std::string family, std::string ratios_file = "");
  std::string name() const override;
  std::shared_ptr<wan::BlockStackHook> block_hook() override { return hook_; }
  void on_model_change() override { must_run_ = {true, true}; }
  std::optional<std::vector<std::array<bool, 2>>> planned_blocks() const override {
    return schedule_;
  }
  bool decide(int step, int branch);

 private:
  double thresh_;
  int k_;
  double retention_;
  std::string family_, ratios_file_;
  std::vector<std::array<bool, 2>> schedule_;
  std::array<bool, 2> must_run_{true, true};
  std::shared_ptr<wan::BlockStackHook> hook_;
};

std::unique_ptr<StepMethod> make_magcache(const std::string& options, const RunInfo& run);

}  // namespace vidax::accel
