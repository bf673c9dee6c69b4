// FlowDPMSolverMultistepScheduler (Wan's wan/utils/fm_solvers.py) as the Wan pipelines use it:
// algorithm dpmsolver++, solver_type midpoint, solver_order 2, lower_order_final, final sigma 0,
// flow_prediction, with the sigmas of get_sampling_sigmas (first sigma exactly 1).
//
// Per step i (x0_i = x_i - s_i * v_i, lambda = log(1 - s) - log(s), h = lambda_{i+1} - lambda_i):
//   first order (step 0 and the last step):  x_{i+1} = (s_{i+1}/s_i) x_i - alpha_{i+1} (e^-h - 1)
//   x0_i second order otherwise (2M midpoint):    ... - 0.5 alpha_{i+1} (e^-h - 1) D1,
//       D1 = (1 / r0) (x0_i - x0_{i-1}), r0 = (lambda_i - lambda_{i-1}) / h.
// IEEE infinities carry the edge cases exactly as in the reference: at s_0 = 1, lambda_0 = -inf,
// h = +inf, e^-h = 0 (step 0 is x_1 = s_1 x_0 + alpha_1 x0_0); at step 1, r0 = +inf so D1 = 0;
// at the last step s = 0 gives lambda = +inf and x_N = x0 exactly.
// Scalars are float32 with one rounding per op, as torch 0-dim float32 tensors.
#include <algorithm>
#include <cmath>
#include <memory>

#include "sampling/scheduler.h"
#include "sampling/step_math.h"

namespace vidax {
namespace {

using sampling_detail::flow_lambda;
using sampling_detail::for_each_element;
using sampling_detail::torch_expf;

class DpmppScheduler final : public Scheduler {
 public:
  DpmppScheduler(int steps, double shift) : Scheduler(dpmpp_schedule(steps, shift)) {}
  std::string_view name() const override { return "dpm++"; }
  Tensor step(const Tensor& model_out, const Tensor& sample) override;

 private:
  void clear_history() override {
    m_prev_ = Tensor();
    lower_order_nums_ = 0;
  }
  Tensor m_prev_;  // x0 prediction of the previous step
  int lower_order_nums_ = 0;
};

Tensor DpmppScheduler::step(const Tensor& model_out, const Tensor& sample) {
  check_step(model_out, sample);
  const int i = step_index_;
  const Tensor v_t = model_out.contiguous();
  const Tensor x_t = sample.contiguous();
  const float* x = x_t.data<float>();
  const float* v = v_t.data<float>();
  const int64_t n = x_t.numel();

  const float sigma_s0 = sigma_at(i);
  const float sigma_t = sigma_at(i + 1);

  Tensor x0 = Tensor::zeros(x_t.shape(), DType::kF32);
  float* m0 = x0.mutable_data<float>();
  for_each_element(n, [&](int64_t e) {
    const float sv = sigma_s0 * v[e];
    m0[e] = x[e] - sv;
  });

  const bool last = i == steps() - 1;  // final_sigmas_type "zero" forces first order here
  const bool first_order = lower_order_nums_ < 1 || last;

  const float alpha_t = 1.0f - sigma_t;
  const float lambda_t = flow_lambda(sigma_t);
  const float lambda_s0 = flow_lambda(sigma_s0);
  const float h = lambda_t - lambda_s0;
  const float sample_scale = sigma_t / sigma_s0;
  const float exp_m1 = torch_expf(-h) - 1.0f;
  const float d0_scale = alpha_t * exp_m1;

  Tensor out = Tensor::zeros(x_t.shape(), DType::kF32);
  float* o = out.mutable_data<float>();
  if (first_order) {
    for_each_element(n, [&](int64_t e) {
      const float a = sample_scale * x[e];
      const float b = d0_scale * m0[e];
      o[e] = a - b;
    });
  } else {
    const float sigma_s1 = sigma_at(i - 1);
    const float lambda_s1 = flow_lambda(sigma_s1);
    const float h_0 = lambda_s0 - lambda_s1;
    const float r0 = h_0 / h;
    const float inv_r0 = (1.0f / r0) * 1.0f;  // Python 1.0 / tensor = reciprocal() * 1.0
    const float d1_scale = 0.5f * d0_scale;
    const float* m1 = m_prev_.data<float>();
    for_each_element(n, [&](int64_t e) {
      const float diff = m0[e] - m1[e];
      const float d1 = inv_r0 * diff;
      const float a = sample_scale * x[e];
      const float b = d0_scale * m0[e];
      const float ab = a - b;
      const float c = d1_scale * d1;
      o[e] = ab - c;
    });
  }

  m_prev_ = x0;
  lower_order_nums_ = std::min(lower_order_nums_ + 1, 2);
  ++step_index_;
  last_x0_pred_ = x0;
  return out;
}

}  // namespace

std::unique_ptr<Scheduler> make_dpmpp_scheduler(int steps, double shift) {
  return std::make_unique<DpmppScheduler>(steps, shift);
}

}  // namespace vidax
