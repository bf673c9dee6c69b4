// TeaCache for Wan (TeaCache4Wan2.1, `teacache_forward`): per CFG branch, the relative L1
// change of the modulated input (the time embedding `e`, or its projection `e0` in the
// reference's use_ret_steps mode) between consecutive calls is rescaled by a published
// polynomial and accumulated; while the sum stays under the threshold the block stack is
// skipped and its last residual added instead. The first step (e mode: 1, e0 mode: 5 steps)
// and, in e mode, the last step always run. On Wan the time embedding depends on t alone, so
// the decisions depend on the weights' time MLP, the sampler and the steps, not on the prompt.
// Spec: teacache[:thresh=0.2][,mode=e|e0][,model=auto|t2v-1.3b|t2v-14b|i2v-480p|i2v-720p]
//       [,coeffs=c0/c1/c2/c3/c4]   (docs/step-methods.md)
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

// The published polynomial (highest power first, numpy.poly1d order) for a model family and
// mode (e0 = use_ret_steps); nullopt when there is none.
std::optional<std::array<double, 5>> teacache_coefficients(const std::string& family, bool e0);

// One decision, as the reference computes it (for tests and reports).
struct TeaCacheDecision {
  int step = 0, branch = 0;
  double rel_l1 = 0;    // mean|m - m_prev| / mean|m_prev| (0 inside the always-run windows)
  double rescaled = 0;  // poly(rel_l1)
  double acc = 0;       // the accumulated distance after this call (reset to 0 when it runs)
  bool run = true;      // whether the block stack ran
};

class TeaCache : public StepMethod {
 public:
  TeaCache(RunInfo run, double thresh, bool e0, std::array<double, 5> coefficients,
           std::string family);
  std::string name() const override;
  std::shared_ptr<wan::BlockStackHook> block_hook() override { return hook_; }
  void on_model_change() override;
  const std::vector<TeaCacheDecision>& decisions() const { return decisions_; }

  // The decision for one call (what the hook calls): m is e or e0 of that call.
  bool decide(int step, int branch, std::span<const float> e, std::span<const float> e0);

 private:
  double thresh_;
  bool e0_;
  std::array<double, 5> coefficients_;
  std::string family_;
  std::array<double, 2> acc_{};
  std::array<std::vector<float>, 2> previous_;
  std::array<bool, 2> must_run_{true, true};
  std::vector<TeaCacheDecision> decisions_;
  std::shared_ptr<wan::BlockStackHook> hook_;
};

std::unique_ptr<StepMethod> make_teacache(const std::string& options, const RunInfo& run);

}  // namespace vidax::accel
