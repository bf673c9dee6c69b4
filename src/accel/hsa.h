// HSA, heterogeneous step allocation (a seed method; mechanics after RAS and
// shared/research/step-methods.md section 2.8): on most steps only the tokens whose velocity
// still changes run through the model; the others advance with their cached velocity, which
// under the Euler sampler is exactly k Euler steps with a frozen velocity. Active tokens attend
// to the whole sequence through the DiT's key/value store (inactive tokens' keys and values from
// their last evaluation: KV-cache synchronisation), so the GEMMs, the FFN and the attention
// queries run on the active rows only.
//
// Per step: the first `warmup` steps, the sync steps (fractions of the run) and the last step
// are dense (every token, which also refreshes the store). Otherwise the active set is the
// `budget` share of the tokens with the highest score s_j x exp(gamma x idle_j), where s_j is
// the relative change of token j's velocity between its last two evaluations,
// |v_last - v_prev| / |v_last| over its patch's channels, and idle_j the steps since it last ran
// (the starvation guard). Both CFG branches run the same set.
//
// Spec: hsa[:budget=0.5][,warmup=5][,sync=0.4/0.73][,gamma=0.1]. Needs --sampler euler (the
// cached update of an inactive token is an Euler step; UniPC and DPM++ keep per-step history
// of the whole latent, which a per-token schedule would have to carry per token: not built).
// One process or --mesh cfg=2 (token subsets are not split over sequence or tensor parallel
// ranks).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

class Hsa : public StepMethod {
 public:
  Hsa(RunInfo run, double budget, int warmup, std::vector<double> sync, double gamma);
  std::string name() const override;
  const std::vector<int64_t>* active_tokens(int step) override;
  bool needs_kv_store() const override { return true; }
  void complete_prediction(int step, Tensor& prediction) override;
  void on_model_change() override { must_be_dense_ = true; }

  bool dense_step(int step) const;
  // The active set chosen for the step (after active_tokens(step)); empty on dense steps.
  const std::vector<int64_t>& active() const { return active_; }

 private:
  double budget_;
  int warmup_;
  std::vector<double> sync_;
  double gamma_;
  std::vector<int> sync_steps_;
  bool must_be_dense_ = false;
  int current_step_ = -1;
  bool current_dense_ = true;
  std::vector<int64_t> active_;
  int64_t row_width_ = 0;               // C x pt x ph x pw values per token
  std::vector<int64_t> element_of_;     // [L, row_width_]: each value's index in the prediction
  std::vector<float> v_last_, v_prev_;  // [L, row_width_]: each token's last two velocities
  std::vector<int> evaluations_;        // per token: how many velocities it has (capped at 2)
  std::vector<int> idle_;               // per token: steps since it last ran
};

std::unique_ptr<StepMethod> make_hsa(const std::string& options, const RunInfo& run);

}  // namespace vidax::accel
