// Frame-level quality metrics of `vidax eval`: fidelity of a clip to a reference clip (PSNR and
// SSIM) and temporal consistency (mean absolute frame-to-frame change). Every metric reads
// clips as U8 [F, H, W, 3] RGB (what the video writer stores, see io/video_writer.h
// to_uint8_rgb) and works on values v / 255 in [0, 1].
//
//  - PSNR: 10 log10(1 / MSE), the MSE over every pixel, channel and frame of the clip; +inf when
//    the clips are identical.
//  - SSIM (Wang, Bovik, Sheikh, Simoncelli 2004): 11x11 Gaussian window with sigma 1.5
//    (normalised to sum 1), C1 = (0.01 L)^2, C2 = (0.03 L)^2 with L = 1, evaluated at every
//    position where the window fits inside the frame ("valid", as the paper's reference code),
//    averaged over positions, then over the three channels and the frames. 1.0 when identical.
//  - temporal change: mean over t of mean |frame t+1 - frame t| (all pixels and channels); 0 for
//    a still clip or a single frame.
//
// Pure functions; safe to call from any number of threads (they use OpenMP inside).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace vidax::eval {

inline constexpr int kSsimWindow = 11;
inline constexpr double kSsimSigma = 1.5;
inline constexpr double kSsimC1 = 0.01 * 0.01;  // (K1 L)^2, L = 1
inline constexpr double kSsimC2 = 0.03 * 0.03;  // (K2 L)^2

// The 1-D Gaussian taps (sum 1); the 2-D window is their outer product.
std::array<double, kSsimWindow> ssim_gaussian_taps();

// InputError naming `what` unless `clip` is U8 [F, H, W, 3] with F >= 1 (and, for SSIM, H and W
// >= 11), and, for the two-clip metrics, both clips have the same shape.
double psnr(const Tensor& clip, const Tensor& reference, const std::string& what = "clip");
double ssim(const Tensor& clip, const Tensor& reference, const std::string& what = "clip");
double temporal_change(const Tensor& clip, const std::string& what = "clip");

// SSIM of one plane pair, values in [0, 1], row-major [height, width] (the per-channel,
// per-frame term of ssim()); exposed for tests.
double ssim_plane(std::span<const double> x, std::span<const double> y, int64_t height,
                  int64_t width);

}  // namespace vidax::eval
