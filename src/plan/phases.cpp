// The phases of one generation around the denoising loop (plan/planner.h PhaseCost).
#include <algorithm>

#include "models/wan/t5_encoder.h"
#include "models/wan/vae_schedule.h"
#include "plan/compute_cost.h"
#include "plan/planner.h"

namespace vidax::plan {
namespace {

// Spatial tiles along one axis of `total` latent pixels, as the runtime cuts them (tiles of
// `tile` overlapping by max(1, tile / 8), the last pulled back to end at the edge, so every tile
// is whole); 1 when the tile covers the axis.
int64_t tiles_along(int64_t total, int64_t tile) {
  if (tile <= 0 || tile >= total) return 1;
  const int64_t stride = std::max<int64_t>(1, tile - std::max<int64_t>(1, tile / 8));
  return (total - tile + stride - 1) / stride + 1;
}

// 2 x multiply-adds of the image encoder: the patch embedding and the blocks the pipeline runs
// (all but the last, clip_vision.h), each q|k|v|o, the MLP and the attention over its tokens.
double clip_flops(const clip::ClipVisionConfig& c) {
  const auto n = static_cast<double>(c.tokens()), d = static_cast<double>(c.dim);
  const auto patch = static_cast<double>(3 * c.patch_size * c.patch_size);
  const double block =
      2.0 * n * (4.0 * d * d + 2.0 * d * static_cast<double>(c.ffn_dim)) + 4.0 * n * n * d;
  return 2.0 * n * patch * d + static_cast<double>(c.num_layers - 1) * block;
}

}  // namespace

PhaseCost predict_phases(const PlanRequest& r, const Topology& topo, const dist::MeshSpec& mesh,
                         double step_seconds, double work_fraction) {
  PhaseCost p;
  const int devices = mesh.size();
  // A phase `active` ranks run while the others wait: time-shared CPU processes get the cores
  // the waiting ones leave.
  const auto alone = [&](int active) { return topo.device.alone_speedup(active, devices); };
  const bool fp32 = r.precision == wan::Precision::kFP32;
  const bool vae_fp32 = r.vae_precision == wan::Precision::kFP32;
  if (r.t5) {
    // A CFG rank encodes its own branch's prompt; one rank of a guided cfg=1 mesh encodes both.
    const double encodes = r.guided && mesh.cfg == 1 ? 2.0 : 1.0;
    const double flops = wan::T5Encoder::forward_flops(*r.t5, r.text_tokens) * encodes /
                         static_cast<double>(mesh.tp);
    p.text = op_seconds(topo.device.at_rows(r.text_tokens), {"umt5", dist::OpClass::kGemm, flops},
                        fp32) /
             alone(mesh.cfg * mesh.tp);
  }
  if (r.image) {
    if (r.clip)
      p.image += op_seconds(topo.device.at_rows(r.clip->tokens()),
                            {"clip", dist::OpClass::kGemm, clip_flops(*r.clip)}, fp32);
    if (r.vae) {
      // I2V encodes the whole conditioning video (the image, then zeros); TI2V the image alone.
      const int64_t frames = r.config.kind == wan::DitKind::kI2V ? r.frames : 1;
      p.image += compute_seconds(
          topo.device, wan::vae_encode_schedule(*r.vae, frames, r.height, r.width, r.vae_precision),
          vae_fp32);
    }
  }
  p.image /= alone(1);
  p.denoise = static_cast<double>(r.steps) * step_seconds * work_fraction;
  if (r.vae) {
    const int64_t ss = r.vae->spatial_stride();
    const int64_t lh = r.height / ss, lw = r.width / ss;
    const int64_t nh = tiles_along(lh, r.vae_tile), nw = tiles_along(lw, r.vae_tile);
    p.decode_tiles = nh * nw;
    p.decode_ranks = p.decode_tiles > 1 ? devices : 1;
    const int64_t th = nh > 1 ? r.vae_tile : lh, tw = nw > 1 ? r.vae_tile : lw;
    const double tile_seconds = compute_seconds(
        topo.device, wan::vae_decode_schedule(*r.vae, r.frames, th * ss, tw * ss, r.vae_precision),
        vae_fp32);
    const int64_t own = (p.decode_tiles + p.decode_ranks - 1) / p.decode_ranks;
    // Only the ranks that got a tile decode (fewer than the ranks when the tiles are few).
    p.decode = static_cast<double>(own) * tile_seconds /
               alone(static_cast<int>(std::min<int64_t>(p.decode_tiles, p.decode_ranks)));
    if (p.decode_ranks > 1) {
      // Every latent frame's decoded tiles (3 f32 channels) go to every other rank.
      const double sent = static_cast<double>(own * th * tw * ss * ss * r.frames) * 3.0 * 4.0 *
                          static_cast<double>(p.decode_ranks - 1);
      const double latent_frames = static_cast<double>(1 + (r.frames - 1) / r.vae_stride_t);
      p.decode += sent / topo.injection_bandwidth() + latent_frames * topo.collective_latency;
    }
  }
  p.total = p.text + p.image + p.denoise + p.decode;
  return p;
}

}  // namespace vidax::plan
