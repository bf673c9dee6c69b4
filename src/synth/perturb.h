// Degradations used to check that the analyzer is not fooled by what a generator's output looks
// like next to a clean render: Gaussian pixel noise, a mild blur, and JPEG-like block
// compression. They take and return F32 [3, F, H, W] video in [-1, 1]. Test instruments, not
// part of the deterministic generator: the noise uses libm (log, cos), so its exact values may
// differ between platforms.
//
// Pure functions; safe to call from any number of threads.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace vidax::synth {

// x + N(0, sigma^2) per value, clamped to [-1, 1]; seeded (splitmix64 + Box-Muller).
Tensor add_noise(const Tensor& video, float sigma, uint64_t seed);
// 3x3 box filter per frame and channel, edges clamped.
Tensor box_blur3(const Tensor& video);
// Per frame: RGB -> YCbCr, chroma averaged over 2x2 (4:2:0), 8x8 DCT of each plane quantised with
// the JPEG (Annex K) tables scaled to `quality` (1..100, libjpeg's scaling), then back.
Tensor jpeg_like(const Tensor& video, int quality);

// "none", "noise" (sigma 0.1), "blur", "jpeg" (quality 50); InputError naming `flag` otherwise.
Tensor perturb(const Tensor& video, const std::string& kind, uint64_t seed,
               const std::string& flag);

}  // namespace vidax::synth
