// The text-to-video denoising loop of the reference pipeline (wan/text2video.py): for each
// scheduler timestep, the model runs on the conditional and unconditional contexts, the two
// predictions are combined with classifier-free guidance, and the scheduler steps the latent.
// The model sees the int64 timestep. Not thread-safe (drives one model).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "models/wan/dit.h"

namespace vidax::dist {
class Group;
}
namespace vidax::accel {
class StepMethod;
}

namespace vidax {

struct DenoiseOptions {
  std::string sampler = "unipc";
  int steps = 50;
  double shift = 5.0;
  double guide_scale = 5.0;
  // A step method (accel/step_method.h) made for this run, or null (every call runs in full).
  // The loop installs its block-stack hook on each model, asks it before each step whether the
  // step's calls can be replaced, shows it the outputs of the steps that ran, and records what
  // ran in it (StepMethod::report()). Not owned; it must outlive the call.
  accel::StepMethod* accel = nullptr;
};

// The image conditioning of an image-to-video run (pipeline/image_conditioning.h); all empty for
// text-to-video.
struct DenoiseConditioning {
  Tensor y;         // Wan 2.1 I2V / FLF2V: [4 + z, F, H, W] mask and encoded frames
  Tensor clip_fea;  // Wan 2.1 I2V / FLF2V: [images, 257, clip_dim] CLIP features
  // Wan 2.2 TI2V: the encoded image [C, 1, H, W]. It replaces latent frame 0 before the loop and
  // after every step, and the tokens of that frame (the first `frame0_tokens`) see t = 0.
  Tensor first_frame;
  int64_t frame0_tokens = 0;
};

struct DenoiseStep {
  int index;
  int64_t timestep;
  double seconds;        // wall time of this step (both model calls and the solver)
  const Tensor& latent;  // after the step
  int expert = 0;        // DitExperts: 0 the high-noise expert (or the only model), 1 the low
  double guide_scale = 0;
};
using DenoiseCallback = std::function<void(const DenoiseStep&)>;

// noise: [C, F, H, W] F32. context / context_null: [L, text_dim] unpadded. Returns the final
// latent. An undefined context_null runs the conditional branch only (no guidance).
// With a mesh in `ctx` whose cfg axis is 2, cfg rank 0 runs the conditional branch and rank 1
// the unconditional one, and the two predictions are exchanged once per step; every rank then
// applies the same guidance and scheduler step, so the latent is the same on every rank (and
// equal to one process's). The model must have been given the same context (set_context).
Tensor denoise(wan::WanDit& model, const Tensor& noise, const Tensor& context,
               const Tensor& context_null, int64_t seq_len, const DenoiseOptions& options,
               const DenoiseCallback& on_step = nullptr, const ExecContext& ctx = {},
               const DenoiseConditioning& conditioning = {});

// Wan 2.2 A14B's mixture of two experts, as the official text2video.py runs it: the
// high-noise expert denoises the steps whose (int64) timestep is >= `boundary` (the config's
// boundary ratio x 1000: 875 for T2V, 900 for I2V), the low-noise expert the others, each with
// its own guide scale. Timesteps only decrease, so there is one switch; the experts are made on
// first use and the previous one is destroyed before the next is made (one is resident at a
// time, as the official --offload_model keeps one on the GPU).
struct DitExperts {
  std::function<std::unique_ptr<wan::WanDit>()> make_high, make_low;
  double boundary = 0;
  double guide_high = 5.0, guide_low = 5.0;
  // The expert a timestep belongs to: 0 high, 1 low.
  int expert_for(int64_t timestep) const {
    return static_cast<double>(timestep) >= boundary ? 0 : 1;
  }
};

// denoise() with the experts; options.guide_scale is ignored (each expert has its own).
Tensor denoise_experts(DitExperts& experts, const Tensor& noise, const Tensor& context,
                       const Tensor& context_null, int64_t seq_len, const DenoiseOptions& options,
                       const DenoiseCallback& on_step = nullptr, const ExecContext& ctx = {},
                       const DenoiseConditioning& conditioning = {});

// One guided prediction for sample `s` (its context and cfg_branch are set here): the
// conditional and unconditional forwards in this process, or with a cfg group of 2 this rank's
// branch and an all-gather of the other's; then classifier_free_guidance. Every rank of the
// group returns the same tensor.
Tensor guided_prediction(wan::WanDit& model, wan::DitSample s, const Tensor& context,
                         const Tensor& context_null, double guide_scale, dist::Group* cfg_group);

// uncond + guide_scale * (cond - uncond), element-wise in f32 in the reference's order.
Tensor classifier_free_guidance(const Tensor& cond, const Tensor& uncond, double guide_scale);

}  // namespace vidax
