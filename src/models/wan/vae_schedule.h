// The Wan VAE's work for planners, as a schedule of compute ops (dist/schedule.h) walked from the
// architecture description the model is built from (vae_tensors.h): per stage, the convolutions'
// FLOPs (kConv; the 1x1 ones kGemm, as they run as GEMMs), the middle blocks' single-head attention
// (kAttention) and the norms, dtype conversions, upsampling and frame copies between them (kMemory,
// bytes read and written). The frame counts follow this implementation's schedule (vae.h), which is
// the reference's:
//  - encode: frame 0 alone, then chunks of `temporal_stride` frames; a time downsampler passes the
//    first chunk by and halves the others, so a level of n frames leaves 1 + (n - 1) / 2;
//  - decode: latent frame by latent frame; a time upsampler passes latent frame 0 by and doubles
//    the others, so a level of n frames leaves 1 + 2 (n - 1).
// Not counted: biases, padding, the 1x1 quant convs (under 0.01% of the FLOPs) and the convs' own
// input and output traffic (they are priced by their FLOPs). Pure; thread-safe.
#pragma once

#include <cstdint>

#include "dist/schedule.h"
#include "models/wan/dit.h"  // Precision
#include "models/wan/vae_config.h"

namespace vidax::wan {

// One decode of the latent of a `frames` x `height` x `width` clip (pixels; frames = 1 + 4k,
// sizes multiples of the spatial stride), one segment per decoder level ("decoder.conv_in",
// "decoder.middle", "decoder.stage<i>", "decoder.head"). `precision`: the convolutions' input
// dtype (the conversions' bytes). InputError on an impossible size.
dist::Schedule vae_decode_schedule(const VaeConfig& config, int64_t frames, int64_t height,
                                   int64_t width, Precision precision);

// One encode of a `frames` x `height` x `width` clip, segments "encoder.conv_in",
// "encoder.stage<i>", "encoder.middle", "encoder.head".
dist::Schedule vae_encode_schedule(const VaeConfig& config, int64_t frames, int64_t height,
                                   int64_t width, Precision precision);

}  // namespace vidax::wan
