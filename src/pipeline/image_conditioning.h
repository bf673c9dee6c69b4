// What the official Wan image-to-video pipelines build from the input image(s), reproduced
// exactly (../shared/research/image-to-video.md, checked against the official code's fixtures
// in tests/data/wan_i2v):
//  - Wan 2.1 I2V / FLF2V (wan/image2video.py, wan/first_last_frame2video.py): the output size
//    from the image's aspect ratio and the requested area; the image bicubic-resized (torch,
//    no crop, no clamp) to it; the VAE input [first, zeros..., (last)]; the 4-channel frame mask;
//    `y` = [mask; encoded latent] and the CLIP features of the original image(s).
//  - Wan 2.2 TI2V (wan/textimage2video.py): the size from best_output_size, the image resized
//    with PIL's Lanczos to cover it and centre-cropped; its one-frame latent replaces latent
//    frame 0 before and after every step, whose tokens see timestep 0.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "io/image_reader.h"

namespace vidax {

struct PixelSize {
  int64_t width = 0, height = 0;
};

// Wan 2.1 I2V / FLF2V: lat_h = round(sqrt(area * h / w) // stride // patch * patch), lat_w the
// same with w / h (numpy float floor divisions); the size is lat * stride. InputError when the
// area is too small for one patch.
PixelSize wan21_i2v_size(int64_t image_width, int64_t image_height, int64_t max_area,
                         int64_t vae_stride = 8, int64_t patch = 2);

// Wan 2.2 `best_output_size(w, h, dw, dh, expected_area)`: of rounding the width or the height
// first to its multiple, the candidate whose aspect ratio is closer to the image's.
PixelSize wan22_best_output_size(int64_t image_width, int64_t image_height, int64_t multiple_w,
                                 int64_t multiple_h, int64_t max_area);

// The mask channels of Wan 2.1 I2V / FLF2V: [4, F', lat_h, lat_w] with F' = 1 + (frames-1)/4;
// latent frame 0 is 1 in all four channels (pixel frame 0 repeated 4x), and with a last frame
// latent frame F'-1 is 1 in channel 3 only.
Tensor i2v_frame_mask(int64_t frames, int64_t lat_h, int64_t lat_w, bool last_frame);

// The VAE input: [3, frames, h, w] with the first image at frame 0, zeros (mid-grey) after, and
// the last image at frame frames-1 when given. Images are [3, h, w] F32 in [-1, 1].
Tensor i2v_vae_input(const Tensor& first, const Tensor* last, int64_t frames);

// y = [mask; latent] on channels: [4 + z, F', lat_h, lat_w].
Tensor i2v_condition(const Tensor& mask, const Tensor& latent);

// Wan 2.2 TI2V's image: Lanczos resize to cover size (round(iw * s) x round(ih * s),
// s = max(ow / iw, oh / ih)), centre crop, then [3, oh, ow] F32 in [-1, 1].
Tensor ti2v_image(const RgbImage& image, PixelSize size);

// Per-token timesteps of Wan 2.2 TI2V: tokens of latent frame 0 (the first `frame0_tokens`) get
// 0, the other `tokens - frame0_tokens` get t. [tokens] I64.
Tensor ti2v_token_timesteps(int64_t t, int64_t tokens, int64_t frame0_tokens);

// latent[:, 0] = first[:, 0] (first: [C, 1, H, W]); latent [C, F, H, W] is written in place.
void replace_first_latent_frame(Tensor& latent, const Tensor& first);

}  // namespace vidax
