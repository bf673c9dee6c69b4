#include "pipeline/model_defaults.h"

namespace vidax {

ModelDefaults model_defaults(const wan::DitConfig& dit, const wan::VaeConfig& vae,
                             bool two_experts) {
  ModelDefaults d;
  if (two_experts) {
    const bool i2v = dit.in_dim > dit.out_dim;  // noise + mask + image latent channels
    d.family = i2v ? "Wan 2.2 I2V A14B" : "Wan 2.2 T2V A14B";
    d.width = 1280, d.height = 720, d.frames = 81, d.fps = 16;
    d.steps = 40;
    d.shift = i2v ? 5.0 : 12.0;
    d.guide_high = i2v ? 3.5 : 4.0;
    d.guide_low = i2v ? 3.5 : 3.0;
    d.boundary_ratio = i2v ? 0.900 : 0.875;
    return d;
  }
  if (vae.version == wan::VaeVersion::kWan22) {
    d.family = "Wan 2.2 TI2V 5B";
    d.width = 1280, d.height = 704, d.frames = 121, d.fps = 24;
    return d;
  }
  if (dit.kind == wan::DitKind::kI2V) {
    const bool flf = dit.flf_pos_tokens > 0;
    d.family = flf ? "Wan 2.1 FLF2V 14B" : "Wan 2.1 I2V 14B";
    d.width = 1280, d.height = 720;
    d.steps = flf ? 50 : 40;
    d.shift = flf ? 16.0 : 5.0;
    d.guide_high = d.guide_low = flf ? 5.5 : 5.0;
    d.negative_prefix = flf ? "镜头切换，镜头晃动，" : "镜头晃动，";
    return d;
  }
  if (dit.dim >= 5120) {
    d.family = "Wan 2.1 14B";
    d.width = 1280, d.height = 720;
    return d;
  }
  d.family = "Wan 2.1 1.3B";
  return d;
}

}  // namespace vidax
