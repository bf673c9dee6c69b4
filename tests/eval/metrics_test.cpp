// PSNR, SSIM and temporal change against direct scalar implementations (a 2-D window sum at
// every position, no separable filtering) on random clips of ragged sizes, and on known cases.
#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax::eval {
namespace {

Tensor random_clip(int64_t f, int64_t h, int64_t w, uint32_t seed) {
  Tensor t = Tensor::zeros(Shape{f, h, w, 3}, DType::kU8);
  std::mt19937 rng(seed);
  uint8_t* p = t.mutable_data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(rng() & 0xff);
  return t;
}

// A smooth image plus noise of amplitude `noise`, clamped: a more realistic SSIM input.
Tensor noisy_copy(const Tensor& clip, int noise, uint32_t seed) {
  Tensor t = clip.clone();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-noise, noise);
  uint8_t* p = t.mutable_data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<uint8_t>(std::clamp(p[i] + d(rng), 0, 255));
  return t;
}

Tensor smooth_clip(int64_t f, int64_t h, int64_t w) {
  Tensor t = Tensor::zeros(Shape{f, h, w, 3}, DType::kU8);
  uint8_t* p = t.mutable_data<uint8_t>();
  for (int64_t i = 0, fi = 0; fi < f; ++fi)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < 3; ++c)
          p[i++] = static_cast<uint8_t>(
              127 +
              100 * std::sin(0.2 * static_cast<double>(x + 2 * fi) + 0.7 * static_cast<double>(c)) *
                  std::cos(0.15 * static_cast<double>(y)));
  return t;
}

// The direct definitions.
double psnr_direct(const Tensor& a, const Tensor& b) {
  double se = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = (a.data<uint8_t>()[i] - b.data<uint8_t>()[i]) / 255.0;
    se += d * d;
  }
  return 10 * std::log10(1.0 / (se / static_cast<double>(a.numel())));
}

double ssim_direct(const Tensor& a, const Tensor& b) {
  const int64_t f = a.dim(0), h = a.dim(1), w = a.dim(2);
  double g[11][11], gs = 0;
  for (int i = 0; i < 11; ++i)
    for (int j = 0; j < 11; ++j) {
      g[i][j] = std::exp(-((i - 5) * (i - 5) + (j - 5) * (j - 5)) / (2 * 1.5 * 1.5));
      gs += g[i][j];
    }
  double total = 0;
  for (int64_t fi = 0; fi < f; ++fi)
    for (int64_t c = 0; c < 3; ++c) {
      double plane = 0;
      for (int64_t y = 0; y + 11 <= h; ++y)
        for (int64_t x = 0; x + 11 <= w; ++x) {
          double mx = 0, my = 0, xx = 0, yy = 0, xy = 0;
          for (int i = 0; i < 11; ++i)
            for (int j = 0; j < 11; ++j) {
              const int64_t at = ((fi * h + y + i) * w + x + j) * 3 + c;
              const double u = a.data<uint8_t>()[at] / 255.0, v = b.data<uint8_t>()[at] / 255.0;
              const double wgt = g[i][j] / gs;
              mx += wgt * u, my += wgt * v, xx += wgt * u * u, yy += wgt * v * v, xy += wgt * u * v;
            }
          const double c1 = 1e-4, c2 = 9e-4;
          plane += ((2 * mx * my + c1) * (2 * (xy - mx * my) + c2)) /
                   ((mx * mx + my * my + c1) * (xx - mx * mx + yy - my * my + c2));
        }
      total += plane / static_cast<double>((h - 10) * (w - 10));
    }
  return total / static_cast<double>(f * 3);
}

double temporal_direct(const Tensor& a) {
  const int64_t f = a.dim(0), n = a.numel() / f;
  if (f < 2) return 0;
  double sum = 0;
  for (int64_t t = 0; t + 1 < f; ++t)
    for (int64_t i = 0; i < n; ++i)
      sum += std::abs(a.data<uint8_t>()[(t + 1) * n + i] - a.data<uint8_t>()[t * n + i]) / 255.0;
  return sum / static_cast<double>((f - 1) * n);
}

TEST(Metrics, GaussianTapsSumToOneAndAreSymmetric) {
  const auto t = ssim_gaussian_taps();
  double s = 0;
  for (double v : t) s += v;
  EXPECT_NEAR(s, 1.0, 1e-15);
  for (int i = 0; i < kSsimWindow; ++i) EXPECT_DOUBLE_EQ(t[i], t[kSsimWindow - 1 - i]);
  EXPECT_NEAR(t[6] / t[5], std::exp(-1.0 / (2 * 1.5 * 1.5)), 1e-15);
}

TEST(Metrics, MatchDirectImplementationsOnRaggedRandomClips) {
  const int64_t sizes[][3] = {{1, 11, 11}, {2, 13, 29}, {3, 23, 17}, {5, 12, 40}};
  uint32_t seed = 1;
  for (const auto& s : sizes) {
    const Tensor a = random_clip(s[0], s[1], s[2], seed++);
    const Tensor noisy = noisy_copy(a, 30, seed++);
    const Tensor other = random_clip(s[0], s[1], s[2], seed++);
    for (const Tensor* b : {&noisy, &other}) {
      EXPECT_NEAR(psnr(a, *b), psnr_direct(a, *b), 1e-9);
      EXPECT_NEAR(ssim(a, *b), ssim_direct(a, *b), 1e-9);
    }
    EXPECT_NEAR(temporal_change(a), temporal_direct(a), 1e-12);
  }
  const Tensor sa = smooth_clip(3, 31, 26), sb = noisy_copy(sa, 8, 99);
  EXPECT_NEAR(ssim(sa, sb), ssim_direct(sa, sb), 1e-9);
  EXPECT_NEAR(temporal_change(sa), temporal_direct(sa), 1e-12);
}

TEST(Metrics, IdenticalClipsAreInfiniteAndOne) {
  const Tensor a = smooth_clip(2, 20, 24);
  EXPECT_TRUE(std::isinf(psnr(a, a)));
  EXPECT_GT(psnr(a, a), 0);
  EXPECT_NEAR(ssim(a, a), 1.0, 1e-12);
  const Tensor r = random_clip(2, 20, 24, 7);
  EXPECT_NEAR(ssim(r, r.clone()), 1.0, 1e-12);
}

TEST(Metrics, OffByOneEverywhereIs48Decibels) {
  // Every byte differs by exactly 1: MSE = (1/255)^2, PSNR = 20 log10(255) = 48.1308 dB.
  const Tensor a = smooth_clip(2, 16, 16);
  Tensor b = a.clone();
  uint8_t* p = b.mutable_data<uint8_t>();
  for (int64_t i = 0; i < b.numel(); ++i)
    p[i] = static_cast<uint8_t>(p[i] < 128 ? p[i] + 1 : p[i] - 1);
  EXPECT_NEAR(psnr(a, b), 20 * std::log10(255.0), 1e-12);
  EXPECT_NEAR(psnr(a, b), 48.130803608679, 1e-9);
}

TEST(Metrics, ConstantClipsFollowTheClosedForm) {
  // No variance: SSIM = (2 mu_x mu_y + C1) / (mu_x^2 + mu_y^2 + C1) at every position.
  Tensor a = Tensor::zeros(Shape{1, 12, 15, 3}, DType::kU8), b = a.clone();
  std::fill_n(a.mutable_data<uint8_t>(), a.numel(), uint8_t{100});
  std::fill_n(b.mutable_data<uint8_t>(), b.numel(), uint8_t{140});
  const double x = 100 / 255.0, y = 140 / 255.0;
  EXPECT_NEAR(ssim(a, b), (2 * x * y + 1e-4) / (x * x + y * y + 1e-4), 1e-12);
  EXPECT_NEAR(psnr(a, b), 10 * std::log10(1.0 / ((y - x) * (y - x))), 1e-12);
  EXPECT_DOUBLE_EQ(temporal_change(a), 0.0);
}

// Values computed once by an independent implementation (PyTorch float64 conv2d with the 11x11
// Gaussian window, 'valid'), on a clip defined by a formula both sides can build.
Tensor formula_clip(bool noisy, int amplitude) {
  const int64_t f = 2, h = 19, w = 23;
  Tensor t = Tensor::zeros(Shape{f, h, w, 3}, DType::kU8);
  uint8_t* p = t.mutable_data<uint8_t>();
  for (int64_t fi = 0, i = 0; fi < f; ++fi)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < 3; ++c, ++i) {
          int64_t v = (x * 37 + y * 11 + fi * 5 + c * 71) % 256;
          if (noisy) v += (x * 7 + y * 13 + c * 3 + fi) % (2 * amplitude + 1) - amplitude;
          p[i] = static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
        }
  return t;
}

TEST(Metrics, SmallNoiseGivesTheKnownValues) {
  const Tensor a = formula_clip(false, 0);
  EXPECT_NEAR(psnr(a, formula_clip(true, 2)), 45.147086411814, 1e-9);
  EXPECT_NEAR(ssim(a, formula_clip(true, 2)), 0.999778393576, 1e-9);
  EXPECT_NEAR(psnr(a, formula_clip(true, 20)), 26.828693021618, 1e-9);
  EXPECT_NEAR(ssim(a, formula_clip(true, 20)), 0.985212447081, 1e-9);
}

TEST(Metrics, SsimIsSymmetricAndDropsWithNoise) {
  const Tensor a = smooth_clip(2, 24, 24);
  const Tensor b1 = noisy_copy(a, 4, 1), b2 = noisy_copy(a, 40, 1);
  EXPECT_NEAR(ssim(a, b1), ssim(b1, a), 1e-12);
  EXPECT_LT(ssim(a, b2), ssim(a, b1));
  EXPECT_LT(ssim(a, b1), 1.0);
  EXPECT_LT(psnr(a, b2), psnr(a, b1));
}

TEST(Metrics, TemporalChangeOfAKnownClip) {
  // Frame t is filled with 10 t: every step changes every byte by 10.
  Tensor a = Tensor::zeros(Shape{4, 8, 9, 3}, DType::kU8);
  const int64_t n = 8 * 9 * 3;
  for (int64_t t = 0; t < 4; ++t)
    std::fill_n(a.mutable_data<uint8_t>() + t * n, n, static_cast<uint8_t>(10 * t));
  EXPECT_NEAR(temporal_change(a), 10 / 255.0, 1e-15);
  EXPECT_DOUBLE_EQ(temporal_change(a.slice(0, 0, 1)), 0.0);
}

TEST(Metrics, BadClipsAreInputErrors) {
  const Tensor a = smooth_clip(2, 16, 16);
  EXPECT_THROW(psnr(a, smooth_clip(2, 16, 20)), InputError);
  EXPECT_THROW(ssim(smooth_clip(1, 10, 30), smooth_clip(1, 10, 30)), InputError);
  EXPECT_THROW(psnr(Tensor::zeros(Shape{2, 16, 16, 3}), a), InputError);  // F32, not U8
  EXPECT_THROW(temporal_change(Tensor::zeros(Shape{16, 16, 3}, DType::kU8)), InputError);
  try {
    ssim(a, smooth_clip(3, 16, 16), "clip 7");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("clip 7"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vidax::eval
