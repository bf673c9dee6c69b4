// The latent arithmetic of a progressive-resolution stage switch (DVG, accel/dvg.h), after
// Jenga's jenga_wan.py: the data prediction of the step that ends a stage is resized to the next
// stage's grid and noised back to the next step's noise level.
//   x0  = x - sigma_i * v                      (the CFG-combined velocity of step i)
//   x0' = resize_latent(x0, grid')             (upsampling only)
//   x'  = (1 - sigma') * x0' + sigma' * eps    (eps: fresh noise of the new grid)
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace vidax::accel {

// A latent grid: frames, height, width (latent units).
using LatentGrid = std::array<int64_t, 3>;

LatentGrid grid_of(const Tensor& latent);  // [C, F, H, W] -> {F, H, W}

// x [C, F, H, W] F32 resized to `grid` as torch.nn.functional.interpolate(mode="trilinear",
// align_corners=False) resizes, except that latent frame 0 is resized on its own (bilinear in
// space) and frames 1.. are interpolated among themselves: Wan's causal VAE encodes pixel frame 0
// alone, so frame 0 is not a neighbour in time of frame 1. The grid must not be smaller than x's
// in any dimension (InputError-free: a CHECK, callers plan the grids). [C, F', H', W'] F32.
Tensor resize_latent(const Tensor& x, const LatentGrid& grid);

// The corner [C, :F', :H', :W'] of x, copied (contiguous): i.i.d. Gaussian noise stays i.i.d.
Tensor crop_latent(const Tensor& x, const LatentGrid& grid);

// Noise [C, F, H, W] on a smaller grid by nearest-neighbour subsampling (output index o takes
// input floor((o + 0.5) * in / out); frame 0 stays frame 0, frames 1.. among themselves): each
// value is one of the input's, so i.i.d. Gaussian noise stays i.i.d., and every value sits where
// its full-grid original sits in the video.
Tensor subsample_noise(const Tensor& noise, const LatentGrid& grid);

// x' = (1 - sigma) * x0 + sigma * noise, element-wise in f32 (the reference's add_noise).
Tensor renoise(const Tensor& x0, const Tensor& noise, float sigma);

// x - sigma * v, element-wise in f32 (the schedulers' data prediction).
Tensor data_prediction(const Tensor& x, const Tensor& v, float sigma);

}  // namespace vidax::accel
