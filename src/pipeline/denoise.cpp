#include "pipeline/denoise.h"

#include <chrono>

#include "sampling/scheduler.h"

namespace vidax {

Tensor classifier_free_guidance(const Tensor& cond_in, const Tensor& uncond_in,
                                double guide_scale) {
  VIDAX_CHECK(cond_in.shape() == uncond_in.shape(), "CFG shape mismatch");
  const Tensor cond = cond_in.contiguous(), uncond = uncond_in.contiguous();
  Tensor out = Tensor::zeros(cond.shape());
  const float* c = cond.data<float>();
  const float* u = uncond.data<float>();
  float* o = out.mutable_data<float>();
  const float g = static_cast<float>(guide_scale);  // torch uses the scalar in f32 for f32 tensors
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float diff = c[i] - u[i];
    const float scaled = g * diff;
    o[i] = u[i] + scaled;
  }
  return out;
}

Tensor denoise(wan::WanDit& model, const Tensor& noise, const Tensor& context,
               const Tensor& context_null, int64_t seq_len, const DenoiseOptions& options,
               const DenoiseCallback& on_step) {
  auto scheduler = make_scheduler(options.sampler, options.steps, options.shift);
  Tensor latent = noise.to(DType::kF32);
  const auto& timesteps = scheduler->timesteps();
  for (int i = 0; i < scheduler->steps(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    wan::DitSample s;
    s.x = latent;
    s.t = Tensor::zeros(Shape{1}, DType::kI64);
    s.t.mutable_data<int64_t>()[0] = timesteps[static_cast<size_t>(i)];
    s.seq_len = seq_len;
    s.step = i;
    s.steps = scheduler->steps();
    s.context = context;
    Tensor cond = model.forward(s);
    Tensor pred = cond;
    if (context_null.defined()) {
      s.context = context_null;
      s.cfg_branch = 1;
      Tensor uncond = model.forward(s);
      pred = classifier_free_guidance(cond, uncond, options.guide_scale);
    }
    latent = scheduler->step(pred, latent);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (on_step) on_step({i, timesteps[static_cast<size_t>(i)], dt, latent});
  }
  return latent;
}

}  // namespace vidax
