#include "pipeline/denoise.h"

#include <array>
#include <chrono>
#include <utility>

#include "accel/step_method.h"
#include "dist/mesh.h"
#include "pipeline/image_conditioning.h"
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

std::array<Tensor, 2> branch_predictions(wan::WanDit& model, wan::DitSample s,
                                         const Tensor& context, const Tensor& context_null,
                                         dist::Group* cfg_group) {
  if (cfg_group == nullptr || cfg_group->size() == 1) {
    s.context = context;
    s.cfg_branch = 0;
    const Tensor cond = model.forward(s);
    s.context = context_null;
    s.cfg_branch = 1;
    return {cond, model.forward(s)};
  }
  // This rank's branch, then both branches' predictions on every rank: [2, C, F, H, W].
  const int branch = cfg_group->rank();
  s.context = branch == 0 ? context : context_null;
  s.cfg_branch = branch;
  const Tensor mine = model.forward(s).contiguous();
  Tensor both = Tensor::zeros(Shape{2, mine.numel()});
  cfg_group->all_gather(mine.data<float>(), both.mutable_data<float>(), mine.numel(), DType::kF32);
  return {both.select(0, 0).reshape(mine.shape()), both.select(0, 1).reshape(mine.shape())};
}

Tensor guided_prediction(wan::WanDit& model, wan::DitSample s, const Tensor& context,
                         const Tensor& context_null, double guide_scale, dist::Group* cfg_group) {
  const auto [cond, uncond] =
      branch_predictions(model, std::move(s), context, context_null, cfg_group);
  return classifier_free_guidance(cond, uncond, guide_scale);
}

namespace {

// The loop shared by one model and the experts: `model_for(t)` gives the model and guide scale
// (and expert index) of a timestep.
struct StepModel {
  wan::WanDit* model;
  double guide_scale;
  int expert;
};

Tensor denoise_loop(const std::function<StepModel(int64_t)>& model_for, const Tensor& noise,
                    const Tensor& context, const Tensor& context_null, int64_t seq_len,
                    const DenoiseOptions& options, const DenoiseCallback& on_step,
                    const ExecContext& ctx, const DenoiseConditioning& cond) {
  dist::Group* cfg_group =
      ctx.mesh != nullptr && ctx.mesh->cfg().size() > 1 ? &ctx.mesh->cfg() : nullptr;
  if (cfg_group != nullptr && !context_null.defined())
    throw_input_error("--mesh cfg=2 needs classifier-free guidance (a negative context)");
  auto scheduler = make_scheduler(options.sampler, options.steps, options.shift);
  Tensor latent = noise.to(DType::kF32);
  const bool ti2v = cond.first_frame.defined();
  if (ti2v) replace_first_latent_frame(latent, cond.first_frame);
  accel::StepMethod* method = options.accel;
  // Progressive resolution: the method may start on a smaller grid.
  const accel::LatentGrid full_grid = accel::grid_of(latent);
  if (method != nullptr) {
    Tensor start = method->start_latent(latent);
    if (accel::grid_of(start) != full_grid && (ti2v || cond.y.defined()))
      throw_input_error("--accel ", method->name(),
                        ": progressive resolution runs text-to-video only (the image "
                        "conditioning is on the full grid)");
    latent = std::move(start);
  }
  const int branches = context_null.defined() ? 2 : 1;
  if (method != nullptr)
    VIDAX_CHECK(method->run().steps == scheduler->steps() && method->run().branches == branches,
                "step method made for ", method->run().steps, " steps x ", method->run().branches,
                " branches, run with ", scheduler->steps(), " x ", branches);
  wan::WanDit* hooked = nullptr;  // the model the method's block hook is installed on
  int hooked_expert = -1;         // and which expert it is (a new expert may reuse the address)
  // The hooks come off however the loop ends (a cancelled run throws from on_step), so a model
  // kept for the next video (pipeline/resident_models.h) never calls into a finished method.
  struct Unhook {
    wan::WanDit*& model;
    bool kv_store;
    ~Unhook() {
      if (model == nullptr) return;
      model->set_block_hook(nullptr);
      model->set_linear_hook(nullptr);
      if (kv_store) model->set_kv_store(false);
    }
  } unhook{hooked, method != nullptr && method->needs_kv_store()};
  for (int i = 0; i < scheduler->steps(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t t = scheduler->timesteps()[static_cast<size_t>(i)];
    // (an expert change destroys the previous expert inside model_for: not touched again)
    wan::WanDit* const previous = std::exchange(hooked, nullptr);
    const StepModel m = model_for(t);
    if (m.expert == hooked_expert) hooked = previous;
    if (method != nullptr && m.expert != hooked_expert) {
      if (hooked != nullptr) method->on_model_change();
      m.model->set_block_hook(method->block_hook());
      m.model->set_linear_hook(method->linear_hook());
      if (method->needs_kv_store()) m.model->set_kv_store(true);
      hooked = m.model;
      hooked_expert = m.expert;
    }
    wan::DitSample s;
    s.x = latent;
    if (ti2v) {
      const int64_t tokens = latent.numel() / latent.dim(0) / m.model->config().patch_volume();
      s.t = ti2v_token_timesteps(t, tokens, cond.frame0_tokens);
    } else {
      s.t = Tensor::zeros(Shape{1}, DType::kI64);
      s.t.mutable_data<int64_t>()[0] = t;
    }
    s.y = cond.y;
    s.clip_fea = cond.clip_fea;
    s.seq_len = seq_len;
    s.step = i;
    s.steps = scheduler->steps();
    s.context = context;
    s.tokens = method != nullptr ? method->active_tokens(i) : nullptr;
    std::array<Tensor, 2> out;
    if (method != nullptr && method->skip_step(i, latent)) {
      for (int b = 0; b < branches; ++b) out[static_cast<size_t>(b)] = method->output(i, b, latent);
    } else {
      if (branches == 2)
        out = branch_predictions(*m.model, s, context, context_null, cfg_group);
      else
        out[0] = m.model->forward(s);
      if (method != nullptr)
        for (int b = 0; b < branches; ++b) {
          method->observe(i, b, latent, out[static_cast<size_t>(b)]);
          // Under cfg=2 this rank ran one branch; the other's block-stack decision was made
          // alike on the other rank (same time embedding, same state), so it is recorded alike.
          if (cfg_group != nullptr && b != cfg_group->rank() && method->block_hook())
            method->copy_record(i, cfg_group->rank(), b);
        }
    }
    Tensor pred = branches == 2 ? classifier_free_guidance(out[0], out[1], m.guide_scale) : out[0];
    if (method != nullptr) method->complete_prediction(i, pred);
    const float sigma = scheduler->sigmas()[static_cast<size_t>(i)];
    const auto stage =
        method != nullptr ? method->stage_after(i, latent, pred, sigma) : std::nullopt;
    if (stage) {
      // A stage switch: x0 of this step on the next grid, the sampler restarted at the next
      // step (with its new shift) and x0 re-noised to that step's sigma.
      VIDAX_CHECK(i + 1 < scheduler->steps(), method->name(), ": stage switch after the last step");
      const Tensor x0 = accel::data_prediction(latent, pred, sigma);
      if (stage->shift > 0)
        scheduler = make_scheduler(options.sampler, options.steps, stage->shift);
      scheduler->restart_at(i + 1);
      latent = accel::renoise(accel::resize_latent(x0, stage->grid), stage->noise,
                              scheduler->sigmas()[static_cast<size_t>(i + 1)]);
    } else {
      latent = scheduler->step(pred, latent);
    }
    if (ti2v) replace_first_latent_frame(latent, cond.first_frame);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (on_step) on_step({i, t, dt, latent, m.expert, m.guide_scale});
  }
  VIDAX_CHECK(accel::grid_of(latent) == full_grid, "step method ",
              method != nullptr ? method->name() : "", " ended the run on a reduced grid");
  return latent;
}

}  // namespace

Tensor denoise(wan::WanDit& model, const Tensor& noise, const Tensor& context,
               const Tensor& context_null, int64_t seq_len, const DenoiseOptions& options,
               const DenoiseCallback& on_step, const ExecContext& ctx,
               const DenoiseConditioning& conditioning) {
  return denoise_loop(
      [&](int64_t) {
        return StepModel{&model, options.guide_scale, 0};
      },
      noise, context, context_null, seq_len, options, on_step, ctx, conditioning);
}

Tensor denoise_experts(DitExperts& experts, const Tensor& noise, const Tensor& context,
                       const Tensor& context_null, int64_t seq_len, const DenoiseOptions& options,
                       const DenoiseCallback& on_step, const ExecContext& ctx,
                       const DenoiseConditioning& conditioning) {
  VIDAX_CHECK(experts.make_high && experts.make_low, "denoise_experts: an expert has no factory");
  std::unique_ptr<wan::WanDit> current;
  int current_expert = -1;
  auto model_for = [&](int64_t t) {
    const int e = experts.expert_for(t);
    if (e != current_expert) {
      current.reset();  // the previous expert's memory first
      current = e == 0 ? experts.make_high() : experts.make_low();
      current_expert = e;
    }
    return StepModel{current.get(), e == 0 ? experts.guide_high : experts.guide_low, e};
  };
  return denoise_loop(model_for, noise, context, context_null, seq_len, options, on_step, ctx,
                      conditioning);
}

}  // namespace vidax
