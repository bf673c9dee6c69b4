// Scalar references for video_ops.h, written from the PyTorch definitions (F.normalize,
// nn.Upsample, AvgDown3D.forward, DupUp3D.forward in wan/modules/vae*.py) with explicit padded
// and permuted index arithmetic rather than the fused loops of video_ops.cpp.
#include <cmath>
#include <vector>

#include "nn/video_ops.h"

namespace vidax {

void rms_norm_channels_reference(const float* x, float* y, int64_t rows, int64_t c,
                                 const float* gamma, bool silu) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < c; ++i) ss += static_cast<double>(x[r * c + i]) * x[r * c + i];
    const double norm = std::max(std::sqrt(ss), 1e-12);
    for (int64_t i = 0; i < c; ++i) {
      double v = x[r * c + i] / norm * std::sqrt(static_cast<double>(c)) * gamma[i];
      if (silu) v = v / (1.0 + std::exp(-v));
      y[r * c + i] = static_cast<float>(v);
    }
  }
}

void upsample_nearest2x_reference(const float* x, float* y, int64_t t, int64_t h, int64_t w,
                                  int64_t c) {
  // nearest-exact: source index floor((dst + 0.5) * in / out) = floor((dst + 0.5) / 2).
  for (int64_t f = 0; f < t; ++f)
    for (int64_t i = 0; i < 2 * h; ++i)
      for (int64_t j = 0; j < 2 * w; ++j)
        for (int64_t ch = 0; ch < c; ++ch) {
          const auto si = static_cast<int64_t>(std::floor((static_cast<double>(i) + 0.5) / 2.0));
          const auto sj = static_cast<int64_t>(std::floor((static_cast<double>(j) + 0.5) / 2.0));
          y[((f * 2 * h + i) * 2 * w + j) * c + ch] = x[((f * h + si) * w + sj) * c + ch];
        }
}

void avg_down3d_reference(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
                          int64_t c_out, int64_t ft, int64_t fs, int64_t pad_front) {
  // F.pad in front, view (C, T/ft, ft, H/fs, fs, W/fs, fs), permute to (C, ft, fs, fs, T', H',
  // W'), view (c_out, group, T', H', W'), mean over group.
  const int64_t tp = t + pad_front, factor = ft * fs * fs, group = c_in * factor / c_out;
  const int64_t to = tp / ft, ho = h / fs, wo = w / fs;
  std::vector<float> padded(static_cast<size_t>(tp * h * w * c_in), 0.0f);
  for (int64_t i = 0; i < t * h * w * c_in; ++i)
    padded[static_cast<size_t>(pad_front * h * w * c_in + i)] = x[i];
  std::vector<float> perm(static_cast<size_t>(c_in * factor * to * ho * wo));
  for (int64_t ch = 0; ch < c_in; ++ch)
    for (int64_t a = 0; a < ft; ++a)
      for (int64_t b = 0; b < fs; ++b)
        for (int64_t d = 0; d < fs; ++d)
          for (int64_t ot = 0; ot < to; ++ot)
            for (int64_t oh = 0; oh < ho; ++oh)
              for (int64_t ow = 0; ow < wo; ++ow) {
                const int64_t k = (((ch * ft + a) * fs + b) * fs + d);
                perm[static_cast<size_t>(((k * to + ot) * ho + oh) * wo + ow)] =
                    padded[static_cast<size_t>(
                        (((ot * ft + a) * h + oh * fs + b) * w + ow * fs + d) * c_in + ch)];
              }
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t s = 0; s < to * ho * wo; ++s) {
      double acc = 0;
      for (int64_t g = 0; g < group; ++g)
        acc += perm[static_cast<size_t>((o * group + g) * to * ho * wo + s)];
      y[s * c_out + o] = static_cast<float>(acc / static_cast<double>(group));
    }
}

void dup_up3d_reference(const float* x, float* y, int64_t t, int64_t h, int64_t w, int64_t c_in,
                        int64_t c_out, int64_t ft, int64_t fs, int64_t drop_front) {
  // repeat_interleave on channels, view (c_out, ft, fs, fs, T, H, W), permute to
  // (c_out, T, ft, H, fs, W, fs), view (c_out, T*ft, H*fs, W*fs), drop leading frames.
  const int64_t factor = ft * fs * fs, repeats = c_out * factor / c_in;
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t it = 0; it < t; ++it)
      for (int64_t a = 0; a < ft; ++a)
        for (int64_t ih = 0; ih < h; ++ih)
          for (int64_t b = 0; b < fs; ++b)
            for (int64_t iw = 0; iw < w; ++iw)
              for (int64_t d = 0; d < fs; ++d) {
                const int64_t ot = it * ft + a - drop_front;
                if (ot < 0) continue;
                const int64_t rep_channel = ((o * ft + a) * fs + b) * fs + d;
                y[((ot * h * fs + ih * fs + b) * w * fs + iw * fs + d) * c_out + o] =
                    x[((it * h + ih) * w + iw) * c_in + rep_channel / repeats];
              }
}

}  // namespace vidax
