#include "nn/image_resize.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace vidax {
namespace {

// torch's cubic convolution kernel (A = -0.75) for |x| <= 1 and 1 < |x| < 2, in f32.
constexpr float kCubicA = -0.75f;
inline float cubic1(float x) { return ((kCubicA + 2) * x - (kCubicA + 3)) * x * x + 1; }
inline float cubic2(float x) {
  return ((kCubicA * x - 5 * kCubicA) * x + 8 * kCubicA) * x - 4 * kCubicA;
}

// Per output index: the four clamped source indices and their weights, as torch computes them
// (area_pixel_compute_source_index with cubic=true, then the floor / fraction split).
struct CubicTaps {
  std::vector<int64_t> index;  // [out, 4]
  std::vector<float> weight;   // [out, 4]
};

CubicTaps cubic_taps(int64_t in, int64_t out) {
  CubicTaps t;
  t.index.resize(static_cast<size_t>(out * 4));
  t.weight.resize(static_cast<size_t>(out * 4));
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    const float real = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
    const auto floor_index = static_cast<int64_t>(std::floor(real));
    const float f = real - static_cast<float>(floor_index);
    const float rest = 1.0f - f;  // torch's x2 = 1 - t, then x2 + 1 for the last tap
    const float w[4] = {cubic2(f + 1.0f), cubic1(f), cubic1(rest), cubic2(rest + 1.0f)};
    for (int k = 0; k < 4; ++k) {
      t.index[static_cast<size_t>(o * 4 + k)] = std::clamp<int64_t>(floor_index - 1 + k, 0, in - 1);
      t.weight[static_cast<size_t>(o * 4 + k)] = w[k];
    }
  }
  return t;
}

void check_chw(const Tensor& chw, int64_t out_h, int64_t out_w) {
  if (chw.rank() != 3 || chw.dtype() != DType::kF32 || chw.numel() == 0)
    throw_input_error("bicubic resize: image is ", chw.describe(), ", expected F32 [C, H, W]");
  if (out_h <= 0 || out_w <= 0 || out_h > 65536 || out_w > 65536)
    throw_input_error("bicubic resize: output size ", out_w, "x", out_h, " is not in 1..65536");
}

}  // namespace

Tensor resize_bicubic(const Tensor& chw, int64_t out_h, int64_t out_w) {
  check_chw(chw, out_h, out_w);
  const Tensor src = chw.contiguous();
  const int64_t ch = src.dim(0), in_h = src.dim(1), in_w = src.dim(2);
  const CubicTaps ty = cubic_taps(in_h, out_h), tx = cubic_taps(in_w, out_w);
  Tensor out = Tensor::zeros(Shape{ch, out_h, out_w});
  const float* in = src.data<float>();
  float* o = out.mutable_data<float>();
#pragma omp parallel for collapse(2)
  for (int64_t c = 0; c < ch; ++c)
    for (int64_t y = 0; y < out_h; ++y) {
      const int64_t* iy = &ty.index[static_cast<size_t>(y * 4)];
      const float* wy = &ty.weight[static_cast<size_t>(y * 4)];
      const float* plane = in + c * in_h * in_w;
      for (int64_t x = 0; x < out_w; ++x) {
        const int64_t* ix = &tx.index[static_cast<size_t>(x * 4)];
        const float* wx = &tx.weight[static_cast<size_t>(x * 4)];
        // Rows are interpolated along x first, then the four results along y (torch's order).
        float acc = 0;
        for (int r = 0; r < 4; ++r) {
          const float* row = plane + iy[r] * in_w;
          const float v =
              row[ix[0]] * wx[0] + row[ix[1]] * wx[1] + row[ix[2]] * wx[2] + row[ix[3]] * wx[3];
          acc = r == 0 ? v * wy[0] : acc + v * wy[r];
        }
        o[(c * out_h + y) * out_w + x] = acc;
      }
    }
  return out;
}

Tensor resize_bicubic_reference(const Tensor& chw, int64_t out_h, int64_t out_w) {
  check_chw(chw, out_h, out_w);
  const int64_t ch = chw.dim(0), in_h = chw.dim(1), in_w = chw.dim(2);
  const std::vector<float> in = chw.to_float_vector();
  auto kernel = [](double x) {
    const double a = -0.75;
    x = std::fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
  };
  Tensor out = Tensor::zeros(Shape{ch, out_h, out_w});
  float* o = out.mutable_data<float>();
  for (int64_t c = 0; c < ch; ++c)
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        const double sy = (y + 0.5) * in_h / out_h - 0.5, sx = (x + 0.5) * in_w / out_w - 0.5;
        const auto fy = static_cast<int64_t>(std::floor(sy)),
                   fx = static_cast<int64_t>(std::floor(sx));
        double acc = 0;
        for (int64_t j = fy - 1; j <= fy + 2; ++j)
          for (int64_t i = fx - 1; i <= fx + 2; ++i) {
            const int64_t cy = std::clamp<int64_t>(j, 0, in_h - 1),
                          cx = std::clamp<int64_t>(i, 0, in_w - 1);
            acc += kernel(sy - static_cast<double>(j)) * kernel(sx - static_cast<double>(i)) *
                   in[static_cast<size_t>((c * in_h + cy) * in_w + cx)];
          }
        o[(c * out_h + y) * out_w + x] = static_cast<float>(acc);
      }
  return out;
}

namespace {

// PIL (libImaging/Resample.c) Lanczos-3 with its fixed-point 8-bit path.
constexpr int kPrecisionBits = 32 - 8 - 2;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}
double lanczos(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0; }

struct Coeffs {
  int64_t ksize = 0;
  std::vector<int64_t> bounds;  // [out, 2]: first source index, tap count
  std::vector<int32_t> k;       // [out, ksize] fixed point
};

Coeffs precompute(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 3.0 * filterscale;
  Coeffs c;
  c.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(out_size * 2));
  c.k.assign(static_cast<size_t>(out_size * c.ksize), 0);
  std::vector<double> w(static_cast<size_t>(c.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // PIL's own truncation of x + 0.5 (not a rounding to nearest):
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    auto xmin = static_cast<int64_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    auto xmax = static_cast<int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double v = lanczos((static_cast<double>(x + xmin) - center + 0.5) * ss);
      w[static_cast<size_t>(x)] = v;
      ww += v;
    }
    for (int64_t x = 0; x < xmax; ++x) {
      double v = w[static_cast<size_t>(x)];
      if (ww != 0.0) v /= ww;
      const double scaled = v * static_cast<double>(1 << kPrecisionBits);
      c.k[static_cast<size_t>(xx * c.ksize + x)] =
          static_cast<int32_t>(v < 0 ? -0.5 + scaled : 0.5 + scaled);
    }
    c.bounds[static_cast<size_t>(xx * 2)] = xmin;
    c.bounds[static_cast<size_t>(xx * 2 + 1)] = xmax;
  }
  return c;
}

inline uint8_t clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(std::clamp(v, 0, 255));
}

}  // namespace

std::vector<uint8_t> resize_lanczos_rgb8(std::span<const uint8_t> rgb, int64_t width,
                                         int64_t height, int64_t out_w, int64_t out_h) {
  if (width <= 0 || height <= 0 || static_cast<int64_t>(rgb.size()) != width * height * 3)
    throw_input_error("Lanczos resize: ", rgb.size(), " bytes are not a ", width, "x", height,
                      " RGB image");
  if (out_w <= 0 || out_h <= 0 || out_w > 65536 || out_h > 65536)
    throw_input_error("Lanczos resize: output size ", out_w, "x", out_h, " is not in 1..65536");
  std::vector<uint8_t> cur(rgb.begin(), rgb.end());
  int64_t cw = width;
  if (out_w != width) {  // horizontal pass
    const Coeffs c = precompute(width, out_w);
    std::vector<uint8_t> next(static_cast<size_t>(height * out_w * 3));
#pragma omp parallel for
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        const int64_t xmin = c.bounds[static_cast<size_t>(x * 2)];
        const int64_t xmax = c.bounds[static_cast<size_t>(x * 2 + 1)];
        const int32_t* k = &c.k[static_cast<size_t>(x * c.ksize)];
        for (int ch = 0; ch < 3; ++ch) {
          int32_t ss = 1 << (kPrecisionBits - 1);
          for (int64_t i = 0; i < xmax; ++i)
            ss += cur[static_cast<size_t>((y * width + xmin + i) * 3 + ch)] * k[i];
          next[static_cast<size_t>((y * out_w + x) * 3 + ch)] = clip8(ss);
        }
      }
    cur.swap(next);
    cw = out_w;
  }
  if (out_h != height) {  // vertical pass
    const Coeffs c = precompute(height, out_h);
    std::vector<uint8_t> next(static_cast<size_t>(out_h * cw * 3));
#pragma omp parallel for
    for (int64_t y = 0; y < out_h; ++y) {
      const int64_t ymin = c.bounds[static_cast<size_t>(y * 2)];
      const int64_t ymax = c.bounds[static_cast<size_t>(y * 2 + 1)];
      const int32_t* k = &c.k[static_cast<size_t>(y * c.ksize)];
      for (int64_t x = 0; x < cw; ++x)
        for (int ch = 0; ch < 3; ++ch) {
          int32_t ss = 1 << (kPrecisionBits - 1);
          for (int64_t i = 0; i < ymax; ++i)
            ss += cur[static_cast<size_t>(((ymin + i) * cw + x) * 3 + ch)] * k[i];
          next[static_cast<size_t>((y * cw + x) * 3 + ch)] = clip8(ss);
        }
    }
    cur.swap(next);
  }
  return cur;
}

std::vector<uint8_t> crop_rgb8(std::span<const uint8_t> rgb, int64_t width, int64_t height,
                               int64_t left, int64_t top, int64_t out_w, int64_t out_h) {
  if (static_cast<int64_t>(rgb.size()) != width * height * 3 || left < 0 || top < 0 || out_w <= 0 ||
      out_h <= 0 || left + out_w > width || top + out_h > height)
    throw_input_error("crop: window ", out_w, "x", out_h, " at (", left, ", ", top,
                      ") does not fit a ", width, "x", height, " image");
  std::vector<uint8_t> out(static_cast<size_t>(out_w * out_h * 3));
  for (int64_t y = 0; y < out_h; ++y)
    std::copy_n(rgb.data() + ((top + y) * width + left) * 3, out_w * 3, out.data() + y * out_w * 3);
  return out;
}

Tensor rgb8_to_signed_unit(std::span<const uint8_t> rgb, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0 || static_cast<int64_t>(rgb.size()) != width * height * 3)
    throw_input_error("image: ", rgb.size(), " bytes are not a ", width, "x", height, " RGB image");
  Tensor out = Tensor::zeros(Shape{3, height, width});
  float* o = out.mutable_data<float>();
  const int64_t plane = width * height;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) {
      const float unit = static_cast<float>(rgb[static_cast<size_t>(i * 3 + c)]) / 255.0f;
      o[c * plane + i] = (unit - 0.5f) / 0.5f;
    }
  return out;
}

}  // namespace vidax
