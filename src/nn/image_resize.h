// The two image resamplers the official Wan image-to-video pipelines use, reproduced exactly:
//  - torch.nn.functional.interpolate(mode="bicubic", align_corners=False, antialias=False) on
//    float images (Wan 2.1 I2V / FLF2V resize the conditioning frame and the CLIP input with it):
//    cubic convolution with A = -0.75, source index (dst + 0.5) * in / out - 0.5 in f32, the
//    four taps clamped to the border, no antialiasing when shrinking, values not clamped;
//  - PIL Image.resize(LANCZOS) on 8-bit RGB (Wan 2.2 TI2V): the separable Lanczos-3 filter with
//    PIL's fixed-point arithmetic (22 fraction bits, horizontal pass first), bit-exact.
// Pure functions; thread-safe; OpenMP inside.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace vidax {

// chw: [C, H, W] F32 -> [C, out_h, out_w] F32. InputError on non-positive sizes.
Tensor resize_bicubic(const Tensor& chw, int64_t out_h, int64_t out_w);

// rgb: [height, width, 3] uint8 -> [out_h, out_w, 3] uint8 (PIL's LANCZOS, 8 bits per channel).
std::vector<uint8_t> resize_lanczos_rgb8(std::span<const uint8_t> rgb, int64_t width,
                                         int64_t height, int64_t out_w, int64_t out_h);

// The window [top, top + out_h) x [left, left + out_w) of an [height, width, 3] uint8 image
// (inside it).
std::vector<uint8_t> crop_rgb8(std::span<const uint8_t> rgb, int64_t width, int64_t height,
                               int64_t left, int64_t top, int64_t out_w, int64_t out_h);

// torchvision's to_tensor then sub_(0.5).div_(0.5): [height, width, 3] uint8 -> [3, H, W] F32
// in [-1, 1], each value (v / 255 - 0.5) / 0.5 in f32.
Tensor rgb8_to_signed_unit(std::span<const uint8_t> rgb, int64_t width, int64_t height);

// Scalar reference of resize_bicubic (direct 4x4 sum per output pixel, double weights) for tests.
Tensor resize_bicubic_reference(const Tensor& chw, int64_t out_h, int64_t out_w);

}  // namespace vidax
