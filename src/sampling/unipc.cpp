// FlowUniPCMultistepScheduler (Wan's wan/utils/fm_solvers_unipc.py) with the configuration every
// Wan pipeline uses: solver_order 2, predict_x0, solver_type bh2, lower_order_final, no disabled
// corrector steps, final sigma 0, flow_prediction.
//
// Per step i (sigmas s_i, lambda_i = log(1 - s_i) - log(s_i), x0_i = x_i - s_i * v_i):
//   1. corrector (i >= 1): UniC of order p_{i-1} recomputes the sample of this step from the
//      previous step's starting sample, its x0 history and the new x0_i;
//   2. predictor: UniP of order p_i = min(2, steps - i, i + 1) from the (corrected) sample to
//      s_{i+1}.
// With predict_x0, hh = -(lambda_t - lambda_s0), h_phi_1 = B_h = expm1(hh), and
//   x_t = (s_t / s_s0) x - (alpha_t h_phi_1) m0 - (alpha_t B_h) * correction.
// All scalars are float32 (torch 0-dim tensors in the reference), rounded after every op, and
// each tensor expression is evaluated in the reference's order with one rounding per op. The
// last step has s_t = 0: lambda_t = +inf, hh = -inf, expm1(-inf) = -1, so x_N = x0 exactly.
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "sampling/scheduler.h"
#include "sampling/step_math.h"

namespace vidax {
namespace {

using sampling_detail::flow_lambda;
using sampling_detail::for_each_element;
using sampling_detail::torch_expm1f;

// Scalar coefficients of one UniP / UniC update from sigma_s0 to sigma_t (order 1 or 2; the
// order-2 history point is sigma_si).
struct UniCoefficients {
  float sample_scale = 0;  // sigma_t / sigma_s0
  float m0_scale = 0;      // alpha_t * h_phi_1
  float res_scale = 0;     // alpha_t * B_h
  float rk = 0;            // (lambda_si - lambda_s0) / h, order 2 only
  float b0 = 0, b1 = 0;    // right-hand side of the UniC order conditions
};

UniCoefficients uni_coefficients(float sigma_t, float sigma_s0, float sigma_si, int order) {
  UniCoefficients c;
  const float alpha_t = 1.0f - sigma_t;
  const float lambda_t = flow_lambda(sigma_t);
  const float lambda_s0 = flow_lambda(sigma_s0);
  const float h = lambda_t - lambda_s0;
  if (order >= 2) {
    const float lambda_si = flow_lambda(sigma_si);
    const float diff = lambda_si - lambda_s0;
    c.rk = diff / h;
  }
  const float hh = -h;
  const float h_phi_1 = torch_expm1f(hh);
  float h_phi_k = h_phi_1 / hh;
  h_phi_k = h_phi_k - 1.0f;
  const float b_h = torch_expm1f(hh);  // bh2
  c.b0 = (h_phi_k * 1.0f) / b_h;
  h_phi_k = h_phi_k / hh;
  h_phi_k = h_phi_k - 0.5f;  // 1 / factorial(2)
  c.b1 = (h_phi_k * 2.0f) / b_h;
  c.sample_scale = sigma_t / sigma_s0;
  c.m0_scale = alpha_t * h_phi_1;
  c.res_scale = alpha_t * b_h;
  return c;
}

// rhos_c = torch.linalg.solve(R, b) for R = [[1, 1], [rk, 1]], in float32 the way torch 1.13
// does it: R is contiguous, so torch LU-factors R^T = [[1, rk], [1, 1]] (sgetrf; the pivot
// column is [1, 1], a tie, so no row swap: L = [[1, 0], [1, 1]], U = [[1, rk], [0, 1 - rk]])
// and solves the transposed system (sgetrs 'T'): U^T z = b, then L^T rho = z.
void solve_unic_2x2(float rk, float b0, float b1, float* rho0, float* rho1) {
  const float z0 = b0 / 1.0f;
  const float rk_z0 = rk * z0;
  const float num = b1 - rk_z0;
  const float u22 = 1.0f - rk;
  const float z1 = num / u22;
  *rho1 = z1;
  *rho0 = z0 - z1;  // the product 1 * z1 is exact
}

class UniPCScheduler final : public Scheduler {
 public:
  UniPCScheduler(int steps, double shift) : Scheduler(unipc_schedule(steps, shift)) {}
  std::string_view name() const override { return "unipc"; }
  Tensor step(const Tensor& model_out, const Tensor& sample) override;

 private:
  void clear_history() override {
    m_prev_ = m_prev2_ = last_sample_ = Tensor();
    last_order_ = lower_order_nums_ = 0;
  }
  Tensor correct(const Tensor& x0_new) const;
  Tensor predict(const Tensor& sample, const Tensor& m0, int order) const;

  // model_outputs of the reference: x0 predictions of the last two steps (m_prev_ newest).
  Tensor m_prev_, m_prev2_;
  Tensor last_sample_;  // starting sample of the previous step (after its correction)
  int last_order_ = 0;  // predictor order of the previous step = this step's UniC order
  int lower_order_nums_ = 0;
};

Tensor UniPCScheduler::correct(const Tensor& x0_new) const {
  const int i = step_index_;
  const int order = last_order_;
  const float sigma_t = sigma_at(i);
  const float sigma_s0 = sigma_at(i - 1);
  const float sigma_si = order >= 2 ? sigma_at(i - 2) : 0.0f;
  const UniCoefficients c = uni_coefficients(sigma_t, sigma_s0, sigma_si, order);

  const float* x = last_sample_.data<float>();
  const float* m0 = m_prev_.data<float>();
  const float* mt = x0_new.data<float>();
  Tensor out = Tensor::zeros(x0_new.shape(), DType::kF32);
  float* o = out.mutable_data<float>();
  const int64_t n = out.numel();
  if (order == 1) {
    // rhos_c = [0.5]; corr_res = 0 (a Python int in the reference).
    for_each_element(n, [&](int64_t e) {
      const float a = c.sample_scale * x[e];
      const float b = c.m0_scale * m0[e];
      const float x_t_ = a - b;
      const float d1_t = mt[e] - m0[e];
      const float half = 0.5f * d1_t;
      const float res = 0.0f + half;
      const float corr = c.res_scale * res;
      o[e] = x_t_ - corr;
    });
  } else {
    VIDAX_CHECK(order == 2 && m_prev2_.defined(), "UniC order ", order, " without history");
    float rho0, rho1;
    solve_unic_2x2(c.rk, c.b0, c.b1, &rho0, &rho1);
    const float* mi = m_prev2_.data<float>();
    const float rk = c.rk;
    for_each_element(n, [&](int64_t e) {
      const float a = c.sample_scale * x[e];
      const float b = c.m0_scale * m0[e];
      const float x_t_ = a - b;
      const float diff = mi[e] - m0[e];
      const float d1 = diff / rk;
      const float corr_res = rho0 * d1;
      const float d1_t = mt[e] - m0[e];
      const float last = rho1 * d1_t;
      const float res = corr_res + last;
      const float corr = c.res_scale * res;
      o[e] = x_t_ - corr;
    });
  }
  return out;
}

Tensor UniPCScheduler::predict(const Tensor& sample, const Tensor& m0_t, int order) const {
  const int i = step_index_;
  const float sigma_t = sigma_at(i + 1);
  const float sigma_s0 = sigma_at(i);
  const float sigma_si = order >= 2 ? sigma_at(i - 1) : 0.0f;
  const UniCoefficients c = uni_coefficients(sigma_t, sigma_s0, sigma_si, order);

  const float* x = sample.data<float>();
  const float* m0 = m0_t.data<float>();
  Tensor out = Tensor::zeros(sample.shape(), DType::kF32);
  float* o = out.mutable_data<float>();
  const int64_t n = out.numel();
  if (order == 1) {
    // pred_res = 0 (a Python int): x_t = x_t_ - (alpha_t * B_h) * 0.
    const float zero_res = c.res_scale * 0.0f;
    for_each_element(n, [&](int64_t e) {
      const float a = c.sample_scale * x[e];
      const float b = c.m0_scale * m0[e];
      const float x_t_ = a - b;
      o[e] = x_t_ - zero_res;
    });
  } else {
    VIDAX_CHECK(order == 2 && m_prev2_.defined(), "UniP order ", order, " without history");
    const float* m1 = m_prev2_.data<float>();  // after the shift, m_prev2_ is step i-1
    const float rk = c.rk;
    for_each_element(n, [&](int64_t e) {
      const float a = c.sample_scale * x[e];
      const float b = c.m0_scale * m0[e];
      const float x_t_ = a - b;
      const float diff = m1[e] - m0[e];
      const float d1 = diff / rk;
      const float pred_res = 0.5f * d1;  // rhos_p = [0.5]
      const float corr = c.res_scale * pred_res;
      o[e] = x_t_ - corr;
    });
  }
  return out;
}

Tensor UniPCScheduler::step(const Tensor& model_out, const Tensor& sample) {
  check_step(model_out, sample);
  const int i = step_index_;
  const Tensor v = model_out.contiguous();
  const Tensor x = sample.contiguous();

  // convert_model_output: x0 = sample - sigma * v, from the sample as handed in.
  const float sigma = sigma_at(i);
  Tensor x0 = Tensor::zeros(x.shape(), DType::kF32);
  {
    const float* xs = x.data<float>();
    const float* vs = v.data<float>();
    float* o = x0.mutable_data<float>();
    for_each_element(x0.numel(), [&](int64_t e) {
      const float sv = sigma * vs[e];
      o[e] = xs[e] - sv;
    });
  }

  Tensor start;
  if (i > 0 && last_sample_.defined()) {
    start = correct(x0);
    last_corrected_sample_ = start;
  } else {
    start = x.clone();  // kept as history: must not alias the caller's buffer
    last_corrected_sample_ = Tensor();
  }

  m_prev2_ = m_prev_;
  m_prev_ = x0;
  const int order = std::min({2, steps() - i, lower_order_nums_ + 1});  // lower_order_final
  last_order_ = order;
  last_sample_ = start;

  Tensor next = predict(start, x0, order);
  lower_order_nums_ = std::min(lower_order_nums_ + 1, 2);
  ++step_index_;
  last_x0_pred_ = x0;
  return next;
}

}  // namespace

std::unique_ptr<Scheduler> make_unipc_scheduler(int steps, double shift) {
  return std::make_unique<UniPCScheduler>(steps, shift);
}

}  // namespace vidax
