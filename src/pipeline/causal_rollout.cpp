#include "pipeline/causal_rollout.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace vidax {

RolloutPlan plan_rollout(const RolloutOptions& o, int64_t frames, int64_t frame_tokens) {
  RolloutPlan p;
  if (o.chunk_frames < 1) throw_input_error("--chunk-frames: ", o.chunk_frames, " (expected >= 1)");
  if (frames < 1 || frames % o.chunk_frames != 0)
    throw_input_error("--chunk-frames: ", o.chunk_frames, " latent frames per chunk do not divide ",
                      "the video's ", frames, " latent frames (pick a frame count of 4 x ",
                      o.chunk_frames, " x chunks - 3: ", 4 * o.chunk_frames - 3, ", ",
                      8 * o.chunk_frames - 3, ", ", 12 * o.chunk_frames - 3, ", ...)");
  if (frame_tokens < 1) throw_input_error("rollout: ", frame_tokens, " tokens per frame");
  p.chunks = frames / o.chunk_frames;
  p.frame_tokens = frame_tokens;
  p.schedule = rollout_schedule(o.schedule);
  if (o.local_attn_frames == 0 || o.local_attn_frames < -1)
    throw_input_error("--local-attn-size: ", o.local_attn_frames,
                      " (expected -1 for the global cache, or a window in latent frames)");
  if (o.sink_frames < -1) throw_input_error("--sink-size: ", o.sink_frames, " (expected >= 0)");
  if (o.pbsa) {
    if (o.local_attn_frames != -1 || o.sink_frames != -1)
      throw_input_error("--local-attn-size / --sink-size: with --attention pbsa the window and ",
                        "the sink are pbsa's options (", o.pbsa->spec(), ")");
    p.rolling = true;
    p.sink_frames = o.pbsa->sink_frames;
    p.cache_frames = o.pbsa->sink_frames + o.pbsa->window_frames;
    p.persistent_tokens = o.pbsa->persist_frames * frame_tokens;
    if (o.pbsa->window_frames < o.chunk_frames)
      throw_input_error("--attention ", o.pbsa->spec(), ": a window of ", o.pbsa->window_frames,
                        " latent frames cannot hold one chunk of ", o.chunk_frames,
                        " (the cache budget must exceed one chunk)");
    return p;
  }
  const int64_t reference_frames = std::max<int64_t>(1, kReferenceCacheTokens / frame_tokens);
  if (o.local_attn_frames == -1 && frames <= reference_frames) {
    p.rolling = false;  // the reference's global cache, sized to the video
    p.cache_frames = frames;
    p.sink_frames = 0;
    if (o.sink_frames > 0)
      throw_input_error("--sink-size: ", o.sink_frames, " needs a rolling cache ",
                        "(--local-attn-size); this video fits the global cache");
    return p;
  }
  p.rolling = true;
  if (o.local_attn_frames == -1) {  // vidax's default window past the reference's cache
    p.cache_frames = reference_frames;
    p.sink_frames = o.sink_frames >= 0 ? o.sink_frames : o.chunk_frames;
  } else {
    p.cache_frames = o.local_attn_frames;
    p.sink_frames = std::max<int64_t>(o.sink_frames, 0);
  }
  if (p.cache_frames < p.sink_frames + o.chunk_frames && o.local_attn_frames == -1)
    throw_input_error("rollout: the default window (the reference's ", kReferenceCacheTokens,
                      " tokens) is ", p.cache_frames, " latent frames at ", frame_tokens,
                      " tokens a frame, too few for the ", p.sink_frames,
                      " sink frames and one chunk of ", o.chunk_frames,
                      "; set --local-attn-size and --sink-size");
  if (p.cache_frames < p.sink_frames + o.chunk_frames)
    throw_input_error("--local-attn-size: a window of ", p.cache_frames,
                      " latent frames cannot hold the ", p.sink_frames,
                      " sink frames and one chunk of ", o.chunk_frames,
                      " (the cache budget must exceed one chunk)");
  return p;
}

CausalRollout::CausalRollout(wan::WanDit& dit, const Tensor& context, const Shape& latent_shape,
                             const RolloutOptions& options)
    : dit_(dit),
      context_(context),
      shape_(latent_shape),
      opt_(options),
      init_gen_(options.seed),
      step_gen_(options.seed) {
  const wan::DitConfig& c = dit.config();
  if (latent_shape.rank() != 4 || latent_shape[0] != c.out_dim)
    throw_input_error("rollout latent: expected [", c.out_dim, ", F, H, W], got ",
                      latent_shape.str());
  if (latent_shape[2] % c.patch[1] != 0 || latent_shape[3] % c.patch[2] != 0)
    throw_input_error("rollout latent: ", latent_shape.str(), " is not a multiple of the patch");
  const int64_t frame_tokens = (latent_shape[2] / c.patch[1]) * (latent_shape[3] / c.patch[2]);
  plan_ = plan_rollout(options, latent_shape[1], frame_tokens);
  wan::KvCacheOptions ko;
  ko.frame_tokens = frame_tokens;
  ko.capacity_frames = plan_.cache_frames;
  ko.sink_frames = plan_.sink_frames;
  ko.rolling = plan_.rolling;
  ko.persistent_tokens = plan_.persistent_tokens;
  if (options.pbsa) {
    ko.block_tokens = options.pbsa->block;
    ko.score_decay = options.pbsa->decay;
  }
  const int tp = 1;  // one process (the DiT refuses sequence-parallel meshes for causal calls)
  cache_ = std::make_unique<wan::CausalKvCache>(static_cast<int>(c.num_layers),
                                                c.num_heads / tp * c.head_dim(),
                                                dit.precision() == wan::Precision::kBF16, ko);
  // The per-step noise comes after the whole initial draw in the reference's stream.
  step_gen_.skip_randn(latent_shape.numel());
}

Tensor CausalRollout::chunk_noise(TorchGenerator& gen, int64_t frames) {
  const int64_t C = shape_[0], H = shape_[2], W = shape_[3], plane = H * W;
  std::vector<float> fm(static_cast<size_t>(frames * C * plane));  // [n, C, H, W]
  gen.randn(fm.data(), static_cast<int64_t>(fm.size()));
  Tensor out = Tensor::zeros(Shape{C, frames, H, W});
  float* o = out.mutable_data<float>();
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t ch = 0; ch < C; ++ch)
      std::memcpy(o + (ch * frames + f) * plane, fm.data() + (f * C + ch) * plane,
                  sizeof(float) * static_cast<size_t>(plane));
  return out;
}

Tensor CausalRollout::step(const RolloutCapture& capture) {
  if (done()) throw_input_error("rollout: all ", plan_.chunks, " chunks are done");
  if (failed_)
    throw_input_error(
        "rollout: a chunk failed or was cancelled part-way; the rollout cannot go on");
  failed_ = true;  // until this chunk is complete
  Tensor x0 = step_chunk(capture);
  failed_ = false;
  return x0;
}

Tensor CausalRollout::step_chunk(const RolloutCapture& capture) {
  const int64_t n = opt_.chunk_frames, f0 = next_ * n;
  // The chunk's frames of the initial noise. Drawn chunk by chunk: a frame is C x H x W values,
  // a multiple of 16 for every Wan latent, so the Box-Muller groups of the whole draw and of the
  // chunk's draws coincide; otherwise the first chunk draws it all.
  const int64_t frame_values = shape_[0] * shape_[2] * shape_[3];
  if (frame_values % 16 != 0 && next_ == 0) {
    whole_noise_ = chunk_noise(init_gen_, shape_[1]);
  }
  Tensor x = whole_noise_.defined() ? whole_noise_.slice(1, f0, f0 + n).contiguous().clone()
                                    : chunk_noise(init_gen_, n);
  const RolloutSchedule& s = plan_.schedule;
  const auto steps = static_cast<int64_t>(s.t.size());
  const int64_t count = x.numel();
  Tensor x0 = Tensor::zeros(x.shape());
  wan::DitSample sample;
  sample.context = context_;
  sample.kv_cache = cache_.get();
  sample.start_frame = f0;
  sample.steps = steps;
  // PBSA measures the saliency of the cached blocks at the clean pass only (its keys are the
  // ones later chunks read); the denoising calls use its mask without measuring.
  std::optional<sparse::PbsaOptions> no_measure = opt_.pbsa;
  if (no_measure) no_measure->samples = 0;
  sample.pbsa = no_measure ? &*no_measure : nullptr;
  int64_t calls = 0;
  auto poll = [&] {
    if (cancelled_ && cancelled_()) throw Cancelled("the rollout was cancelled");
  };
  for (int64_t k = 0; k < steps; ++k) {
    poll();
    sample.x = x;
    sample.t = Tensor::from_floats(std::vector<float>{s.t[static_cast<size_t>(k)]}, Shape{1});
    sample.step = k;
    const Tensor flow = dit_.forward(sample);
    ++calls;
    flow_to_x0(x.data<float>(), flow.data<float>(), s.x0_sigma[static_cast<size_t>(k)],
               x0.mutable_data<float>(), count);
    if (capture) {
      const std::string p = "step" + std::to_string(k) + ".";
      capture(next_, p + "t", sample.t);
      capture(next_, p + "flow", flow);
      capture(next_, p + "x0", x0);
    }
    if (k + 1 < steps) {
      const Tensor eps = chunk_noise(step_gen_, n);
      Tensor next = Tensor::zeros(x.shape());
      renoise(x0.data<float>(), eps.data<float>(), s.noise_sigma[static_cast<size_t>(k + 1)],
              next.mutable_data<float>(), count);
      if (capture) capture(next_, "step" + std::to_string(k) + ".noise", eps);
      x = next;
    }
  }
  if (capture) capture(next_, "x0", x0);
  if (next_ + 1 < plan_.chunks || opt_.clean_pass_last_chunk) {
    poll();
    sample.x = x0;  // the clean pass: rewrites the chunk's keys / values from its latent
    // (No persistent room: nothing would use the saliency.)
    sample.pbsa = !opt_.pbsa ? nullptr : opt_.pbsa->persist_frames > 0 ? &*opt_.pbsa : &*no_measure;
    sample.t =
        Tensor::from_floats(std::vector<float>{static_cast<float>(opt_.context_noise)}, Shape{1});
    sample.step = steps;
    dit_.forward(sample);
    ++calls;
  }
  ++next_;
  dit_calls_ += calls;
  return x0;
}

}  // namespace vidax
