// Plain flow-matching Euler: x_{i+1} = x_i + (sigma_{i+1} - sigma_i) * v_i, in float32 with the
// step size rounded first, then the product, then the sum. There is no Euler sampler in the
// official Wan code; this one walks the UniPC schedule (sigma_0 = float32(0.999) shifted, model
// timesteps <= 999 as in training, the same timesteps as the default sampler so the two can be
// compared step for step). The last step lands on sigma = 0: x_N = x_{N-1} - sigma_{N-1} v, the
// data prediction.
#include <memory>

#include "sampling/scheduler.h"
#include "sampling/step_math.h"

namespace vidax {
namespace {

using sampling_detail::for_each_element;

class EulerScheduler final : public Scheduler {
 public:
  EulerScheduler(int steps, double shift) : Scheduler(euler_schedule(steps, shift)) {}
  std::string_view name() const override { return "euler"; }

  Tensor step(const Tensor& model_out, const Tensor& sample) override {
    check_step(model_out, sample);
    const int i = step_index_;
    const Tensor v_t = model_out.contiguous();
    const Tensor x_t = sample.contiguous();
    const float* x = x_t.data<float>();
    const float* v = v_t.data<float>();
    const float sigma = sigma_at(i);
    const float dt = sigma_at(i + 1) - sigma;

    Tensor out = Tensor::zeros(x_t.shape(), DType::kF32);
    Tensor x0 = Tensor::zeros(x_t.shape(), DType::kF32);
    float* o = out.mutable_data<float>();
    float* p = x0.mutable_data<float>();
    for_each_element(x_t.numel(), [&](int64_t e) {
      const float dv = dt * v[e];
      o[e] = x[e] + dv;
      const float sv = sigma * v[e];
      p[e] = x[e] - sv;
    });
    ++step_index_;
    last_x0_pred_ = x0;
    return out;
  }
};

}  // namespace

std::unique_ptr<Scheduler> make_euler_scheduler(int steps, double shift) {
  return std::make_unique<EulerScheduler>(steps, shift);
}

}  // namespace vidax
