#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"

namespace vidax::eval {
namespace {

void check_clip(const Tensor& clip, const std::string& what, int64_t min_side) {
  if (!clip.defined() || clip.dtype() != DType::kU8 || clip.rank() != 4 || clip.dim(3) != 3 ||
      clip.dim(0) < 1 || clip.dim(1) < 1 || clip.dim(2) < 1)
    throw_input_error(what, ": expected U8 [frames, height, width, 3] RGB, got ",
                      clip.defined() ? clip.shape().str() : std::string("nothing"));
  if (clip.dim(1) < min_side || clip.dim(2) < min_side)
    throw_input_error(what, ": frames of ", clip.dim(2), "x", clip.dim(1), " are too small (",
                      min_side, "x", min_side, " at least)");
}

void check_pair(const Tensor& clip, const Tensor& reference, const std::string& what,
                int64_t min_side) {
  check_clip(clip, what, min_side);
  check_clip(reference, what + " (reference)", min_side);
  if (clip.shape() != reference.shape())
    throw_input_error(what, ": shape ", clip.shape().str(), " differs from the reference's ",
                      reference.shape().str());
}

}  // namespace

std::array<double, kSsimWindow> ssim_gaussian_taps() {
  std::array<double, kSsimWindow> taps{};
  double sum = 0;
  for (int i = 0; i < kSsimWindow; ++i) {
    const double d = i - (kSsimWindow - 1) / 2;
    taps[static_cast<size_t>(i)] = std::exp(-d * d / (2 * kSsimSigma * kSsimSigma));
    sum += taps[static_cast<size_t>(i)];
  }
  for (double& t : taps) t /= sum;
  return taps;
}

double psnr(const Tensor& clip, const Tensor& reference, const std::string& what) {
  check_pair(clip, reference, what, 1);
  const Tensor a = clip.contiguous(), b = reference.contiguous();
  const uint8_t* pa = a.data<uint8_t>();
  const uint8_t* pb = b.data<uint8_t>();
  const int64_t n = a.numel();
  // Integer squared differences are exact; the sum fits easily in 64 bits (255^2 * 2^40).
  uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int d = static_cast<int>(pa[i]) - static_cast<int>(pb[i]);
    sum += static_cast<uint64_t>(d * d);
  }
  if (sum == 0) return std::numeric_limits<double>::infinity();
  const double mse = static_cast<double>(sum) / (255.0 * 255.0) / static_cast<double>(n);
  return 10.0 * std::log10(1.0 / mse);
}

double ssim_plane(std::span<const double> x, std::span<const double> y, int64_t height,
                  int64_t width) {
  VIDAX_CHECK(height >= kSsimWindow && width >= kSsimWindow, "ssim_plane: ", width, "x", height,
              " is smaller than the window");
  VIDAX_CHECK(static_cast<int64_t>(x.size()) == height * width &&
                  static_cast<int64_t>(y.size()) == height * width,
              "ssim_plane: plane sizes");
  const auto taps = ssim_gaussian_taps();
  const int64_t out_w = width - kSsimWindow + 1, out_h = height - kSsimWindow + 1;
  // Separable filtering, horizontal pass first: five moment maps, each [height, out_w], double.
  constexpr int kMaps = 5;  // x, y, x^2, y^2, xy
  std::vector<double> rows(static_cast<size_t>(kMaps * height * out_w));
  auto row_map = [&](int m, int64_t r) { return rows.data() + (m * height + r) * out_w; };
  for (int64_t r = 0; r < height; ++r) {
    const double* xr = x.data() + r * width;
    const double* yr = y.data() + r * width;
    for (int64_t c = 0; c < out_w; ++c) {
      double s[kMaps] = {0, 0, 0, 0, 0};
      for (int k = 0; k < kSsimWindow; ++k) {
        const double w = taps[static_cast<size_t>(k)];
        const double a = xr[c + k], b = yr[c + k];
        s[0] += w * a;
        s[1] += w * b;
        s[2] += w * a * a;
        s[3] += w * b * b;
        s[4] += w * a * b;
      }
      for (int m = 0; m < kMaps; ++m) row_map(m, r)[c] = s[m];
    }
  }
  // Vertical pass and the SSIM map, summed on the fly.
  double total = 0;
  std::vector<double> acc(static_cast<size_t>(kMaps * out_w));
  for (int64_t r = 0; r < out_h; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = 0; k < kSsimWindow; ++k) {
      const double w = taps[static_cast<size_t>(k)];
      for (int m = 0; m < kMaps; ++m) {
        const double* src = row_map(m, r + k);
        double* dst = acc.data() + m * out_w;
        for (int64_t c = 0; c < out_w; ++c) dst[c] += w * src[c];
      }
    }
    for (int64_t c = 0; c < out_w; ++c) {
      const double mx = acc[static_cast<size_t>(c)], my = acc[static_cast<size_t>(out_w + c)];
      const double sxx = acc[static_cast<size_t>(2 * out_w + c)] - mx * mx;
      const double syy = acc[static_cast<size_t>(3 * out_w + c)] - my * my;
      const double sxy = acc[static_cast<size_t>(4 * out_w + c)] - mx * my;
      total += ((2 * mx * my + kSsimC1) * (2 * sxy + kSsimC2)) /
               ((mx * mx + my * my + kSsimC1) * (sxx + syy + kSsimC2));
    }
  }
  return total / static_cast<double>(out_h * out_w);
}

double ssim(const Tensor& clip, const Tensor& reference, const std::string& what) {
  check_pair(clip, reference, what, kSsimWindow);
  const Tensor a = clip.contiguous(), b = reference.contiguous();
  const int64_t frames = a.dim(0), h = a.dim(1), w = a.dim(2);
  const int64_t planes = frames * 3;
  std::vector<double> per_plane(static_cast<size_t>(planes));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t f = p / 3, ch = p % 3;
    std::vector<double> x(static_cast<size_t>(h * w)), y(static_cast<size_t>(h * w));
    const uint8_t* pa = a.data<uint8_t>() + f * h * w * 3 + ch;
    const uint8_t* pb = b.data<uint8_t>() + f * h * w * 3 + ch;
    for (int64_t i = 0; i < h * w; ++i) {
      x[static_cast<size_t>(i)] = pa[i * 3] / 255.0;
      y[static_cast<size_t>(i)] = pb[i * 3] / 255.0;
    }
    per_plane[static_cast<size_t>(p)] = ssim_plane(x, y, h, w);
  }
  double sum = 0;
  for (double v : per_plane) sum += v;  // fixed order: the result does not depend on threads
  return sum / static_cast<double>(planes);
}

double temporal_change(const Tensor& clip, const std::string& what) {
  check_clip(clip, what, 1);
  const Tensor a = clip.contiguous();
  const int64_t frames = a.dim(0);
  if (frames < 2) return 0.0;
  const int64_t per_frame = a.dim(1) * a.dim(2) * 3;
  const uint8_t* p = a.data<uint8_t>();
  uint64_t sum = 0;
  const int64_t n = (frames - 1) * per_frame;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int d = static_cast<int>(p[i + per_frame]) - static_cast<int>(p[i]);
    sum += static_cast<uint64_t>(d < 0 ? -d : d);
  }
  return static_cast<double>(sum) / 255.0 / static_cast<double>(n);
}

}  // namespace vidax::eval
