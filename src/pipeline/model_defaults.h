// The official defaults of each Wan model family, for whatever a request leaves unset (the
// official generate.py / configs: wan/configs/*.py of Wan2.1 and Wan2.2):
//
//   family                      size       frames  fps  steps  shift  guide (high / low)  boundary
//   Wan 2.1 T2V 1.3B            832x480    81      16   50     5      5                   -
//   Wan 2.1 T2V 14B             1280x720   81      16   50     5      5                   -
//   Wan 2.2 TI2V 5B (2.2 VAE)   1280x704   121     24   50     5      5                   -
//   Wan 2.2 T2V A14B (experts)  1280x720   81      16   40     12     4 / 3               0.875
//   Wan 2.2 I2V A14B (experts)  1280x720   81      16   40     5      3.5 / 3.5           0.900
//   Wan 2.1 I2V 14B             1280x720*  81      16   40     5**    5                   -
//   Wan 2.1 FLF2V 14B           1280x720*  81      16   50     16     5.5                 -
//
// * image-to-video: the area of the size; the output follows the image's aspect ratio.
// ** 3.0 when the size asked is 832x480 or 480x832 (generate.py). The negative prompt of I2V is
// the shared one prefixed with "镜头晃动，", of FLF2V with "镜头切换，镜头晃动，".
//
// Thread-safe (pure).
#pragma once

#include <string>

#include "models/wan/dit_config.h"
#include "models/wan/vae_config.h"

namespace vidax {

struct ModelDefaults {
  std::string family;  // as in the table, for plans and sidecars
  int64_t width = 832, height = 480, frames = 81;
  double fps = 16;
  int steps = 50;
  double shift = 5.0;
  double guide_high = 5.0, guide_low = 5.0;  // one model: both the same
  double boundary_ratio = 0;                 // two experts: the switch, as a fraction of 1000
  std::string negative_prefix;               // prepended to the shared default negative prompt
};

// `two_experts`: the DiT comes as a high-noise and a low-noise expert (Wan 2.2 A14B).
ModelDefaults model_defaults(const wan::DitConfig& dit, const wan::VaeConfig& vae,
                             bool two_experts);

}  // namespace vidax
