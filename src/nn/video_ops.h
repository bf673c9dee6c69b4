// Element-wise and re-layout operations on channels-last video frames [T, H, W, C] used by the
// Wan VAE: the channel RMS norm (L2-normalise * sqrt(C) * gamma) fused with SiLU, nearest 2x
// spatial upsampling, the Wan 2.2 AvgDown3D / DupUp3D shortcuts, and the 2x2 patchify that
// turns an RGB video [3, T, H, W] into 12 channels (and back).
//
// Each op has a scalar `_reference` twin (video_ops_reference.cpp) written straight from the
// PyTorch definitions, for tests. Loops are parallelised over the OpenMP pool; functions are
// thread-safe for disjoint outputs.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace vidax {

// y[r, :] = F.normalize(x[r, :]) * sqrt(C) * gamma (then SiLU when `silu`), for `rows` rows of C
// channels, as PyTorch evaluates it in f32: x / max(||x||_2, 1e-12), times sqrt(C) rounded to
// f32, times gamma. y_dtype F32 or BF16 (rounded once at the end).
void rms_norm_channels(const float* x, void* y, DType y_dtype, int64_t rows, int64_t c,
                       const float* gamma, bool silu);

// [t, h, w, c] -> [t, 2h, 2w, c], nearest neighbour (= 'nearest-exact' at exactly 2x).
void upsample_nearest2x(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c);
// The same for any element type: `pixel_bytes` bytes per pixel (c * sizeof(element)), so bf16
// conv inputs are upsampled after the conversion, at a quarter of the f32 size.
void upsample_nearest2x_bytes(const void* x, void* y, int64_t t, int64_t h, int64_t w,
                              int64_t pixel_bytes);

// AvgDown3D: x [t, h, w, c_in] with `pad_front` zero frames logically in front
// ((t + pad_front) % ft == 0) -> y [(t + pad_front) / ft, h / fs, w / fs, c_out]; each output
// channel is the mean of a group of c_in * ft * fs * fs / c_out space/time-to-channel values.
void avg_down3d(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
                int64_t c_out, int64_t ft, int64_t fs, int64_t pad_front);

// DupUp3D: x [t, h, w, c_in] -> y [t * ft - drop_front, h * fs, w * fs, c_out]: channels
// repeated and moved to time/space; the first `drop_front` output frames are skipped (the
// reference's first_chunk drops ft - 1).
void dup_up3d(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
              int64_t c_out, int64_t ft, int64_t fs, int64_t drop_front);

// video [c, t, H, W] (channel-first, any float dtype and strides; frames [t0, t0+n)) ->
// y [n, H/p, W/p, c*p*p] channels-last, channel order (c, r, q) with r the column offset and q
// the row offset ("b c f (h q) (w r) -> b (c r q) f h w"). p = 1 is a plain transpose.
void patchify_frames(const Tensor& video, int64_t t0, int64_t n, int64_t p, float* y);
// The inverse: x [n, h, w, c*p*p] channels-last -> out [c, n, h*p, w*p] (a channel-first
// tensor view to write into; only frames [0, n) of `out` are written).
void unpatchify_frames(const float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t p,
                       const Tensor& out);

// Scalar references.
void rms_norm_channels_reference(const float* x, float* y, int64_t rows, int64_t c,
                                 const float* gamma, bool silu);
void upsample_nearest2x_reference(const float* x, float* y, int64_t t, int64_t h, int64_t w,
                                  int64_t c);
void avg_down3d_reference(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
                          int64_t c_out, int64_t ft, int64_t fs, int64_t pad_front);
void dup_up3d_reference(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
                        int64_t c_out, int64_t ft, int64_t fs, int64_t drop_front);

}  // namespace vidax
