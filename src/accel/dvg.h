// DVG, progressive resolution across time and space (a seed method; the stage mechanics after
// Jenga's jenga_wan.py, the content-aware choice is vidax's own: shared/research/step-methods.md
// section 2.9). The first steps, where the video's layout forms, run on a smaller latent grid;
// at a stage switch the data prediction is upsampled and re-noised to the next step's noise level
// and the sampler restarts (accel/stage_switch.h); the last stage is always the full grid.
//
// Reductions: "space" scales latent height and width by `scale` (patch-aligned, as Jenga's
// 0.75), "time" keeps latent frame 0 and keeps `time` of the others, "joint" both. mode=auto picks
// one per request from the content: the first `probe` share of the steps runs at the joint grid;
// then, from the data prediction x0 of the last probe step,
//   motion M = mean |x0[f+1] - x0[f]| over frames 1.. / mean |x0 - channel mean|
//   detail D = mean |x0 - 3x3 box blur(x0)|          / mean |x0 - channel mean|
// time is reduced only when M <= motion (interpolated frames lose motion), space only when
// D <= detail (upsampling loses detail); the probe's latent is switched to the chosen grid (the
// full grid when neither) and the run goes on there until the `switch` share of the steps, then
// finishes on the full grid. The default thresholds were calibrated on vidax-tiny's eval suite
// (docs/step-methods.md).
//
// Spec: dvg[:mode=auto|space|time|joint|full][,switch=0.5][,scale=0.75][,time=0.5][,probe=0.1]
//           [,motion=M][,detail=D][,shift=S][,noise=keep|fresh]
// switch=0 or mode=full is one stage: the dense run, bit for bit. shift: the schedule's shift
// after the final switch (Jenga uses the run's + 2; default unchanged). noise: where the noise
// of a reduced stage and of a re-noise comes from: keep (default) takes the run's own noise,
// subsampled to the stage's grid (accel/stage_switch.h) and whole for the full grid, so the
// trajectory stays near the dense one of the same seed; fresh draws new seeded noise for each
// stage (the first stage a corner of the run's noise), as Jenga draws it. Text-to-video only.
// Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

struct DvgOptions {
  std::string mode = "auto";
  double switch_at = 0.5, scale = 0.75, time = 0.5, probe = 0.1;
  double motion = 1.33, detail = 0.385;  // calibrated on vidax-tiny (docs/step-methods.md)
  double shift = 0;                      // 0: the run's
  bool keep_noise = true;  // noise=keep (the run's noise on every grid) or noise=fresh
};

// The content measures of a data prediction [C, F, H, W] (see above); motion is +inf with fewer
// than 3 frames (no pair after frame 0).
struct ContentMeasures {
  double motion = 0, detail = 0;
};
ContentMeasures content_measures(const Tensor& x0);

// The reduction auto mode picks: time when motion <= max_motion and time can be reduced, space
// when detail <= max_detail and space can be; "joint", "time", "space" or "full" (neither).
std::string choose_reduction(const ContentMeasures& m, double max_motion, double max_detail,
                             bool can_reduce_time, bool can_reduce_space);

class Dvg : public StepMethod {
 public:
  Dvg(RunInfo run, DvgOptions o);
  std::string name() const override;
  Tensor start_latent(const Tensor& noise) override;
  std::optional<StageSwitch> stage_after(int step, const Tensor& x, const Tensor& prediction,
                                         float sigma) override;
  void observe(int step, int branch, const Tensor& x, const Tensor& out) override;
  std::optional<StepReport> planned_report() const override;
  nlohmann::json details() const override;

  // The grid of a reduction ("space", "time", "joint", "full") of `full`.
  LatentGrid reduced(const std::string& reduction, const LatentGrid& full) const;
  int switch_step() const { return switch_step_; }  // the first step on the full grid
  int probe_steps() const { return probe_steps_; }

 private:
  // The stages' grids for a full grid (what start_latent sets up; planned_report uses it alone).
  void plan_stages(const LatentGrid& full);
  StageSwitch make_switch(const LatentGrid& grid, double shift, int64_t channels);
  double call_work(const LatentGrid& grid) const;

  DvgOptions o_;
  int switch_step_ = 0, probe_steps_ = 0;
  LatentGrid full_{0, 0, 0}, current_{0, 0, 0};
  std::string choice_;  // auto: the reduction chosen after the probe
  ContentMeasures measured_{};
  bool measured_valid_ = false;
  struct Stage {
    int first_step;
    LatentGrid grid;
  };
  std::vector<Stage> stages_;
  Tensor noise_;  // noise=keep: the run's noise on the full grid
};

std::unique_ptr<StepMethod> make_dvg(const std::string& options, const RunInfo& run);

}  // namespace vidax::accel
