// Rendering a synthetic scene into video frames. Objects are anti-aliased with 4x4 supersampling
// (only pixels within 0.75 px of an edge are supersampled; the rest are decided exactly), and all
// geometry is integer arithmetic in 1/64-pixel units -- no floating point and no libm at all --
// so a (scene, geometry) pair renders to the same bytes on every machine. The only float step
// is the final uint8 -> [-1, 1] mapping, (v - 127.5) / 127.5, one correctly rounded division.
//
// Pure functions; safe to call from any number of threads.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "synth/synth_world.h"

namespace vidax::synth {

struct ClipGeometry {
  int64_t width = 256;
  int64_t height = 256;
  int64_t frames = 17;
};

// vidax-tiny's clip: 256x256, 17 frames -> Wan 2.1 VAE latent 5x32x32 -> 1,280 DiT tokens.
inline constexpr ClipGeometry kTinyGeometry{};

// InputError naming `what` unless 16 <= width, height <= 4096 and 1 <= frames <= 1024.
void check_geometry(const ClipGeometry& g, const std::string& what);
// Wan 2.1 VAE (8x spatial, 4x temporal, causal first frame) then DiT patch (1, 2, 2). InputError
// naming `what` unless width and height are multiples of 16 and frames is 4k + 1.
int64_t dit_tokens(const ClipGeometry& g, const std::string& what);

// U8 [F, H, W, 3] RGB: the dataset's pixel format.
Tensor render_rgb8(const SceneSpec& scene, const ClipGeometry& g);
// F32 [3, F, H, W] in [-1, 1] (the VAE's input convention): rgb8_to_video(render_rgb8(...)).
Tensor render(const SceneSpec& scene, int64_t width, int64_t height, int64_t frames);

// U8 [F, H, W, 3] -> F32 [3, F, H, W], v -> (v - 127.5) / 127.5.
Tensor rgb8_to_video(const Tensor& rgb8);
// F32 [3, F, H, W] in [-1, 1] -> U8 [F, H, W, 3], rounded and clamped.
Tensor video_to_rgb8(const Tensor& video);

// FNV-1a 64 of a contiguous tensor's bytes: the per-clip checksum in dataset manifests.
uint64_t fnv1a64(const Tensor& t);

}  // namespace vidax::synth
