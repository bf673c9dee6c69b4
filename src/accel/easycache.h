// EasyCache for Wan (EasyCache4Wan2.1, `easycache_forward`): output-level caching in latent
// space, no change to the model. On the conditional call of each step it predicts how much the
// output would change, k x mean|x - x_prev| / mean|v_last|, where k = mean|dv| / mean|dx|
// between the last two computed steps; the predictions accumulate and while the sum stays under
// the threshold the whole step (both branches) reuses the last computed transformation:
// v = x + (v_last - x_last) per branch. The first `ret` steps (the reference hard-codes 10) and
// the last step always run. Works with every sampler and any model (it only replaces the
// velocity).
// Spec: easycache[:thresh=0.05][,ret=10]   (docs/step-methods.md)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

// One conditional-call decision, as the reference computes it (for tests and reports).
struct EasyCacheDecision {
  int step = 0;
  double pred_change = 0;  // k x input change / output norm (0 when not computed)
  double acc = 0;          // accumulated after this step (0 when it ran)
  double k = 0;            // the transformation rate in use (0: not known yet)
  bool run = true;
};

class EasyCache : public StepMethod {
 public:
  EasyCache(RunInfo run, double thresh, int ret);
  std::string name() const override;
  bool skip_step(int step, const Tensor& x) override;
  Tensor output(int step, int branch, const Tensor& x) override;
  void observe(int step, int branch, const Tensor& x, const Tensor& out) override;
  const std::vector<EasyCacheDecision>& decisions() const { return decisions_; }

 private:
  double thresh_;
  int ret_;
  float acc_ = 0;                // the reference accumulates a float32 tensor
  std::optional<float> k_;       // transformation rate (float32 in the reference)
  Tensor previous_input_;        // x at the previous conditional call (run or not)
  Tensor computed_input_;        // x at the last computed conditional call
  Tensor computed_output_;       // the conditional output there
  std::array<Tensor, 2> delta_;  // output - x at each branch's last computed call
  std::vector<EasyCacheDecision> decisions_;
};

std::unique_ptr<StepMethod> make_easycache(const std::string& options, const RunInfo& run);

}  // namespace vidax::accel
