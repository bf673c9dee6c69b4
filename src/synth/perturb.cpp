// Noise, blur and JPEG-like degradations of [3, F, H, W] video (see perturb.h).
#include "synth/perturb.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "synth/synth_world.h"

namespace vidax::synth {
namespace {

Tensor checked_f32(const Tensor& video) {
  if (!is_float(video.dtype()) || video.rank() != 4 || video.dim(0) != 3)
    throw_input_error("video: expected float [3, F, H, W], got ", video.describe());
  return video.to(DType::kF32);  // always a fresh owned copy we may write into
}

constexpr std::array<int, 64> kLumaTable = {
    16, 11, 10, 16, 24,  40,  51,  61,  12, 12, 14, 19, 26,  58,  60,  55,
    14, 13, 16, 24, 40,  57,  69,  56,  14, 17, 22, 29, 51,  87,  80,  62,
    18, 22, 37, 56, 68,  109, 103, 77,  24, 35, 55, 64, 81,  104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99};
constexpr std::array<int, 64> kChromaTable = {
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99,
    99, 99, 47, 66, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99};

std::array<float, 64> scaled_table(const std::array<int, 64>& base, int quality) {
  const int s = quality < 50 ? 5000 / quality : 200 - 2 * quality;
  std::array<float, 64> q{};
  for (size_t i = 0; i < 64; ++i)
    q[i] = static_cast<float>(std::clamp((base[i] * s + 50) / 100, 1, 255));
  return q;
}

// Orthonormal 8-point DCT-II basis: basis[u][x].
struct Dct8 {
  float basis[8][8];
  Dct8() {
    const double pi = std::acos(-1.0);
    for (int u = 0; u < 8; ++u)
      for (int x = 0; x < 8; ++x)
        basis[u][x] = static_cast<float>((u == 0 ? std::sqrt(0.125) : 0.5) *
                                         std::cos((2 * x + 1) * u * pi / 16));
  }
};

// Quantises one plane (values 0..255) in 8x8 blocks, edge blocks padded by replication.
void quantise_plane(std::vector<float>& plane, int64_t h, int64_t w,
                    const std::array<float, 64>& q) {
  static const Dct8 dct;
  for (int64_t by = 0; by < h; by += 8) {
    for (int64_t bx = 0; bx < w; bx += 8) {
      float blk[8][8], tmp[8][8], coef[8][8];
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x)
          blk[y][x] =
              plane[static_cast<size_t>(std::min(by + y, h - 1) * w + std::min(bx + x, w - 1))] -
              128.0f;
      for (int u = 0; u < 8; ++u)  // rows: tmp[y][u]
        for (int y = 0; y < 8; ++y) {
          float s = 0;
          for (int x = 0; x < 8; ++x) s += dct.basis[u][x] * blk[y][x];
          tmp[y][u] = s;
        }
      for (int v = 0; v < 8; ++v)
        for (int u = 0; u < 8; ++u) {
          float s = 0;
          for (int y = 0; y < 8; ++y) s += dct.basis[v][y] * tmp[y][u];
          const float step = q[static_cast<size_t>(v * 8 + u)];
          coef[v][u] = std::nearbyint(s / step) * step;
        }
      for (int y = 0; y < 8; ++y)  // inverse: columns then rows
        for (int u = 0; u < 8; ++u) {
          float s = 0;
          for (int v = 0; v < 8; ++v) s += dct.basis[v][y] * coef[v][u];
          tmp[y][u] = s;
        }
      for (int y = 0; y < 8 && by + y < h; ++y)
        for (int x = 0; x < 8 && bx + x < w; ++x) {
          float s = 0;
          for (int u = 0; u < 8; ++u) s += dct.basis[u][x] * tmp[y][u];
          plane[static_cast<size_t>((by + y) * w + bx + x)] = s + 128.0f;
        }
    }
  }
}

}  // namespace

Tensor add_noise(const Tensor& video, float sigma, uint64_t seed) {
  Tensor out = checked_f32(video);
  SynthRng rng(seed);
  const double two_pi = 2.0 * std::acos(-1.0);
  float* d = out.mutable_data<float>();
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; i += 2) {
    // Box-Muller: two normals from two uniforms in (0, 1].
    const double u1 = (static_cast<double>(rng.next() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)) * sigma;
    d[i] = std::clamp(d[i] + static_cast<float>(r * std::cos(two_pi * u2)), -1.0f, 1.0f);
    if (i + 1 < n)
      d[i + 1] = std::clamp(d[i + 1] + static_cast<float>(r * std::sin(two_pi * u2)), -1.0f, 1.0f);
  }
  return out;
}

Tensor box_blur3(const Tensor& video) {
  const Tensor src = checked_f32(video);
  Tensor out = Tensor::zeros(src.shape());  // [3, F, H, W]
  const int64_t planes = src.dim(0) * src.dim(1), h = src.dim(2), w = src.dim(3);
  const float* s = src.data<float>();
  float* d = out.mutable_data<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* sp = s + p * h * w;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        float sum = 0;
        for (int64_t dy = -1; dy <= 1; ++dy)
          for (int64_t dx = -1; dx <= 1; ++dx)
            sum += sp[std::clamp(y + dy, int64_t{0}, h - 1) * w +
                      std::clamp(x + dx, int64_t{0}, w - 1)];
        d[p * h * w + y * w + x] = sum / 9.0f;
      }
  }
  return out;
}

Tensor jpeg_like(const Tensor& video, int quality) {
  if (quality < 1 || quality > 100) throw_input_error("jpeg quality must be 1..100, got ", quality);
  Tensor out = checked_f32(video);
  const int64_t f = out.dim(1), h = out.dim(2), w = out.dim(3), plane = f * h * w;
  const int64_t ch = (h + 1) / 2, cw = (w + 1) / 2;
  const auto luma_q = scaled_table(kLumaTable, quality);
  const auto chroma_q = scaled_table(kChromaTable, quality);
  float* d = out.mutable_data<float>();
  std::vector<float> y_plane(static_cast<size_t>(h * w)), cb(static_cast<size_t>(ch * cw)),
      cr(static_cast<size_t>(ch * cw));
  for (int64_t t = 0; t < f; ++t) {
    float* r = d + t * h * w;
    float* g = r + plane;
    float* b = g + plane;
    std::fill(cb.begin(), cb.end(), 0.0f);
    std::fill(cr.begin(), cr.end(), 0.0f);
    std::vector<float> cnt(cb.size(), 0.0f);
    for (int64_t i = 0; i < h * w; ++i) {
      // [-1, 1] -> 0..255, then BT.601 full-range YCbCr as JFIF uses.
      const float R = (r[i] + 1) * 127.5f, G = (g[i] + 1) * 127.5f, B = (b[i] + 1) * 127.5f;
      y_plane[static_cast<size_t>(i)] = 0.299f * R + 0.587f * G + 0.114f * B;
      const size_t c = static_cast<size_t>((i / w / 2) * cw + (i % w) / 2);
      cb[c] += 128 - 0.168736f * R - 0.331264f * G + 0.5f * B;
      cr[c] += 128 + 0.5f * R - 0.418688f * G - 0.081312f * B;
      cnt[c] += 1;
    }
    for (size_t c = 0; c < cb.size(); ++c) cb[c] /= cnt[c], cr[c] /= cnt[c];
    quantise_plane(y_plane, h, w, luma_q);
    quantise_plane(cb, ch, cw, chroma_q);
    quantise_plane(cr, ch, cw, chroma_q);
    for (int64_t i = 0; i < h * w; ++i) {
      const float Y = y_plane[static_cast<size_t>(i)];
      const size_t c = static_cast<size_t>((i / w / 2) * cw + (i % w) / 2);
      const float Cb = cb[c] - 128, Cr = cr[c] - 128;
      const auto back = [](float v) { return std::clamp(v / 127.5f - 1.0f, -1.0f, 1.0f); };
      r[i] = back(Y + 1.402f * Cr);
      g[i] = back(Y - 0.344136f * Cb - 0.714136f * Cr);
      b[i] = back(Y + 1.772f * Cb);
    }
  }
  return out;
}

Tensor perturb(const Tensor& video, const std::string& kind, uint64_t seed,
               const std::string& flag) {
  if (kind == "none") return video;
  if (kind == "noise") return add_noise(video, 0.1f, seed);
  if (kind == "blur") return box_blur3(video);
  if (kind == "jpeg") return jpeg_like(video, 50);
  throw_input_error(flag, ": expected none, noise, blur or jpeg, got '", kind, "'");
}

}  // namespace vidax::synth
