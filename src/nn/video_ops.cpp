#include "nn/video_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/convert.h"
#include "kernels/cpu/elementwise.h"

namespace vidax {

void rms_norm_channels(const float* x, void* y, DType y_dtype, int64_t rows, int64_t c,
                       const float* gamma, bool silu_after) {
  VIDAX_CHECK(y_dtype == DType::kF32 || y_dtype == DType::kBF16, "rms_norm_channels output ",
              dtype_name(y_dtype));
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(c)));
  constexpr int64_t kBlock = 64;  // rows per task: one f32 scratch block, vectorised SiLU
  const int64_t blocks = (rows + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    std::vector<float> tmp(static_cast<size_t>(kBlock * c));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t r0 = b * kBlock, nr = std::min(kBlock, rows - r0);
      for (int64_t r = 0; r < nr; ++r) {
        const float* xr = x + (r0 + r) * c;
        double ss = 0;
        for (int64_t i = 0; i < c; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const float norm = std::max(static_cast<float>(std::sqrt(ss)), 1e-12f);
        float* tr = tmp.data() + r * c;
        for (int64_t i = 0; i < c; ++i) tr[i] = xr[i] / norm * scale * gamma[i];
      }
      if (silu_after) silu(tmp.data(), tmp.data(), nr * c);
      if (y_dtype == DType::kF32) {
        std::memcpy(static_cast<float*>(y) + r0 * c, tmp.data(),
                    static_cast<size_t>(nr * c) * sizeof(float));
      } else {
        convert_floats(tmp.data(), DType::kF32, static_cast<BFloat16*>(y) + r0 * c, DType::kBF16,
                       static_cast<size_t>(nr * c));
      }
    }
  }
}

void upsample_nearest2x_bytes(const void* x_in, void* y_in, int64_t t, int64_t h, int64_t w,
                              int64_t pixel_bytes) {
  const auto* x = static_cast<const std::byte*>(x_in);
  auto* y = static_cast<std::byte*>(y_in);
  const auto px = static_cast<size_t>(pixel_bytes);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t f = 0; f < t; ++f)
    for (int64_t i = 0; i < 2 * h; ++i) {
      const std::byte* src = x + static_cast<size_t>((f * h + i / 2) * w) * px;
      std::byte* dst = y + static_cast<size_t>((f * 2 * h + i) * 2 * w) * px;
      for (int64_t j = 0; j < w; ++j) {
        std::memcpy(dst + static_cast<size_t>(2 * j) * px, src + static_cast<size_t>(j) * px, px);
        std::memcpy(dst + static_cast<size_t>(2 * j + 1) * px, src + static_cast<size_t>(j) * px,
                    px);
      }
    }
}

void upsample_nearest2x(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c) {
  upsample_nearest2x_bytes(x, y, t, h, w, c * static_cast<int64_t>(sizeof(float)));
}

void avg_down3d(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
                int64_t c_out, int64_t ft, int64_t fs, int64_t pad_front) {
  const int64_t factor = ft * fs * fs;
  VIDAX_CHECK(
      (c_in * factor) % c_out == 0 && (t + pad_front) % ft == 0 && h % fs == 0 && w % fs == 0,
      "avg_down3d shapes");
  const int64_t group = c_in * factor / c_out;
  const int64_t to = (t + pad_front) / ft, ho = h / fs, wo = w / fs;
  const auto n_group = static_cast<float>(group);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t ot = 0; ot < to; ++ot)
    for (int64_t oh = 0; oh < ho; ++oh)
      for (int64_t ow = 0; ow < wo; ++ow) {
        float* yp = y + ((ot * ho + oh) * wo + ow) * c_out;
        for (int64_t o = 0; o < c_out; ++o) {
          float acc = 0.0f;
          for (int64_t g = 0; g < group; ++g) {
            const int64_t idx = o * group + g;  // (c, a, b, d) flattened, d fastest
            const int64_t ch = idx / factor, rem = idx % factor;
            const int64_t a = rem / (fs * fs), bh = (rem / fs) % fs, bw = rem % fs;
            const int64_t it = ot * ft + a - pad_front;
            if (it < 0) continue;  // the zero frames in front add nothing
            acc += x[((it * h + oh * fs + bh) * w + ow * fs + bw) * c_in + ch];
          }
          yp[o] = acc / n_group;
        }
      }
}

void dup_up3d(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
              int64_t c_out, int64_t ft, int64_t fs, int64_t drop_front) {
  const int64_t factor = ft * fs * fs;
  VIDAX_CHECK((c_out * factor) % c_in == 0 && drop_front < t * ft, "dup_up3d shapes");
  const int64_t repeats = c_out * factor / c_in;
  const int64_t to = t * ft - drop_front, ho = h * fs, wo = w * fs;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t ot = 0; ot < to; ++ot)
    for (int64_t oh = 0; oh < ho; ++oh) {
      const int64_t ft_all = ot + drop_front;
      const int64_t it = ft_all / ft, a = ft_all % ft, ih = oh / fs, bh = oh % fs;
      for (int64_t ow = 0; ow < wo; ++ow) {
        const int64_t iw = ow / fs, bw = ow % fs;
        const float* xp = x + ((it * h + ih) * w + iw) * c_in;
        float* yp = y + ((ot * ho + oh) * wo + ow) * c_out;
        for (int64_t o = 0; o < c_out; ++o)
          yp[o] = xp[(((o * ft + a) * fs + bh) * fs + bw) / repeats];
      }
    }
}

void patchify_frames(const Tensor& video, int64_t t0, int64_t n, int64_t p, float* y) {
  VIDAX_CHECK(video.rank() == 4, "patchify_frames video ", video.describe());
  const int64_t c = video.dim(0), hh = video.dim(2), ww = video.dim(3);
  const int64_t h = hh / p, w = ww / p, cp = c * p * p;
  const Tensor v = video.slice(1, t0, t0 + n).to(DType::kF32);  // [c, n, H, W] contiguous
  const float* vs = v.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t f = 0; f < n; ++f)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) {
        float* yp = y + ((f * h + i) * w + j) * cp;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t r = 0; r < p; ++r)
            for (int64_t q = 0; q < p; ++q)
              yp[(ch * p + r) * p + q] = vs[((ch * n + f) * hh + i * p + q) * ww + j * p + r];
      }
}

void unpatchify_frames(const float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t p,
                       const Tensor& out) {
  VIDAX_CHECK(out.rank() == 4 && out.dim(0) == c && out.dim(1) >= n && out.dim(2) == h * p &&
                  out.dim(3) == w * p && out.dtype() == DType::kF32,
              "unpatchify_frames out ", out.describe());
  const int64_t cp = c * p * p;
  float* o = static_cast<float*>(out.raw_mutable_data());
  const int64_t s0 = out.stride(0), s1 = out.stride(1), s2 = out.stride(2), s3 = out.stride(3);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t f = 0; f < n; ++f)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) {
        const float* xp = x + ((f * h + i) * w + j) * cp;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t r = 0; r < p; ++r)
            for (int64_t q = 0; q < p; ++q)
              o[ch * s0 + f * s1 + (i * p + q) * s2 + (j * p + r) * s3] = xp[(ch * p + r) * p + q];
      }
}

}  // namespace vidax
