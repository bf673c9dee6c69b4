#include "pipeline/rollout_run.h"

#include <chrono>

#include "core/error.h"
#include "io/temp_paths.h"

namespace vidax {

void run_rollout(const GenerateOptions& o, const GenerationPlan& plan, wan::WanDit& dit,
                 wan::WanVae& vae, const Tensor& context, uint64_t seed, VideoWriter* writer,
                 GenerationResult& r, Progress& progress) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  RolloutOptions ro = plan.rollout_options;
  ro.seed = seed;
  const LatentGeometry& g = plan.latent;
  CausalRollout rollout(dit, context, Shape{g.channels, g.frames, g.height, g.width}, ro);
  if (o.cancelled) rollout.set_cancel(o.cancelled);
  wan::VaeDecodeOptions vo;
  vo.tile_h = vo.tile_w = o.vae_tile;
  vo.overlap = o.vae_tile > 0 ? std::max<int64_t>(1, o.vae_tile / 8) : 0;
  progress.begin_phase("rollout", static_cast<int>(plan.video.frames), "frame");
  for (int64_t c = 0; c < rollout.chunks(); ++c) {
    const auto t0 = Clock::now();
    Tensor latent;
    try {
      if (o.cancelled && o.cancelled()) throw Cancelled("the rollout was cancelled");
      latent = rollout.step();
    } catch (const Cancelled&) {
      if (r.chunks == 0) throw;  // nothing finished: nothing to publish
      r.interrupted = true;
      break;
    }
    r.denoise_seconds += since(t0);
    const auto t1 = Clock::now();
    const int64_t frames_before = r.frames;
    vo.continues = c > 0;
    vo.more_follows = c + 1 < rollout.chunks();
    vae.decode(
        latent,
        [&](const Tensor& frames) {  // [3, n, H, W]
          if (writer) writer->write(frames);
          r.frames += frames.dim(1);
          if (o.on_frames) o.on_frames(frames);
        },
        vo);
    r.decode_seconds += since(t1);
    ++r.chunks;
    if (r.chunks == 1 && o.graceful_interrupt) install_graceful_interrupt();
    const int64_t made = r.frames - frames_before;
    progress.tick(static_cast<int>(r.frames),
                  since(t0) / static_cast<double>(std::max<int64_t>(made, 1)));
  }
  progress.end_phase();
  if (r.chunks > 0)
    r.seconds_per_step = r.denoise_seconds / static_cast<double>(rollout.dit_calls());
}

}  // namespace vidax
