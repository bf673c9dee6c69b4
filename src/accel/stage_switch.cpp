#include "accel/stage_switch.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace vidax::accel {
namespace {

// torch's linear source index and weights for one output index (align_corners=False, sizes
// given, float arithmetic): in0, in1 and their weights w0, w1.
struct Tap {
  int64_t in0, in1;
  float w0, w1;
};

std::vector<Tap> linear_taps(int64_t in, int64_t out) {
  std::vector<Tap> taps(static_cast<size_t>(out));
  if (in == out) {
    for (int64_t o = 0; o < out; ++o) taps[static_cast<size_t>(o)] = {o, o, 1.f, 0.f};
    return taps;
  }
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    const float half = static_cast<float>(o) + 0.5f;
    const float scaled = scale * half;
    float src = scaled - 0.5f;
    if (src < 0) src = 0;
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const float l1 = std::min(std::max(src - static_cast<float>(i0), 0.f), 1.f);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    taps[static_cast<size_t>(o)] = {i0, i1, 1.f - l1, l1};
  }
  return taps;
}

// Trilinear resize of the frames [f_begin, f_end) of x into the frames [g_begin, g_end) of out
// (every channel), torch's nesting: time outermost, width innermost.
void resize_block(const float* x, int64_t C, int64_t F, int64_t H, int64_t W, int64_t f_begin,
                  int64_t f_end, float* out, int64_t F2, int64_t H2, int64_t W2, int64_t g_begin,
                  int64_t g_end) {
  const auto tt = linear_taps(f_end - f_begin, g_end - g_begin);
  const auto th = linear_taps(H, H2);
  const auto tw = linear_taps(W, W2);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t c = 0; c < C; ++c)
    for (int64_t g = g_begin; g < g_end; ++g) {
      const Tap& t = tt[static_cast<size_t>(g - g_begin)];
      const float* frame0 = x + (c * F + f_begin + t.in0) * H * W;
      const float* frame1 = x + (c * F + f_begin + t.in1) * H * W;
      float* o = out + (c * F2 + g) * H2 * W2;
      for (int64_t h = 0; h < H2; ++h) {
        const Tap& a = th[static_cast<size_t>(h)];
        for (int64_t w = 0; w < W2; ++w) {
          const Tap& b = tw[static_cast<size_t>(w)];
          auto plane = [&](const float* p) {
            const float r0 = p[a.in0 * W + b.in0] * b.w0 + p[a.in0 * W + b.in1] * b.w1;
            const float r1 = p[a.in1 * W + b.in0] * b.w0 + p[a.in1 * W + b.in1] * b.w1;
            return r0 * a.w0 + r1 * a.w1;
          };
          o[h * W2 + w] = plane(frame0) * t.w0 + plane(frame1) * t.w1;
        }
      }
    }
}

}  // namespace

LatentGrid grid_of(const Tensor& latent) {
  VIDAX_CHECK(latent.rank() == 4, "latent must be [C, F, H, W], got ", latent.shape().str());
  return {latent.dim(1), latent.dim(2), latent.dim(3)};
}

Tensor resize_latent(const Tensor& x_in, const LatentGrid& grid) {
  const LatentGrid from = grid_of(x_in);
  VIDAX_CHECK(grid[0] >= from[0] && grid[1] >= from[1] && grid[2] >= from[2] && from[0] >= 1,
              "resize_latent: ", from[0], "x", from[1], "x", from[2], " to ", grid[0], "x", grid[1],
              "x", grid[2], " is not an upsampling");
  const Tensor x = x_in.to(DType::kF32).contiguous();
  const int64_t C = x.dim(0);
  Tensor out = Tensor::zeros(Shape{C, grid[0], grid[1], grid[2]});
  const float* px = x.data<float>();
  float* po = out.mutable_data<float>();
  // Frame 0 alone, then frames 1.. among themselves.
  resize_block(px, C, from[0], from[1], from[2], 0, 1, po, grid[0], grid[1], grid[2], 0, 1);
  if (grid[0] > 1) {
    VIDAX_CHECK(from[0] > 1, "resize_latent: one frame cannot become ", grid[0]);
    resize_block(px, C, from[0], from[1], from[2], 1, from[0], po, grid[0], grid[1], grid[2], 1,
                 grid[0]);
  }
  return out;
}

Tensor crop_latent(const Tensor& x_in, const LatentGrid& grid) {
  const LatentGrid from = grid_of(x_in);
  VIDAX_CHECK(grid[0] <= from[0] && grid[1] <= from[1] && grid[2] <= from[2] && grid[0] >= 1 &&
                  grid[1] >= 1 && grid[2] >= 1,
              "crop_latent: ", grid[0], "x", grid[1], "x", grid[2], " is not inside ", from[0], "x",
              from[1], "x", from[2]);
  return x_in.slice(1, 0, grid[0]).slice(2, 0, grid[1]).slice(3, 0, grid[2]).contiguous();
}

Tensor subsample_noise(const Tensor& x_in, const LatentGrid& grid) {
  const LatentGrid from = grid_of(x_in);
  VIDAX_CHECK(grid[0] <= from[0] && grid[1] <= from[1] && grid[2] <= from[2] && grid[0] >= 1 &&
                  grid[1] >= 1 && grid[2] >= 1 && (grid[0] == 1 || from[0] > 1),
              "subsample_noise: ", grid[0], "x", grid[1], "x", grid[2], " is not inside ", from[0],
              "x", from[1], "x", from[2]);
  auto nearest = [](int64_t in, int64_t out, int64_t o) {
    return std::min(in - 1, ((2 * o + 1) * in) / (2 * out));
  };
  const Tensor x = x_in.to(DType::kF32).contiguous();
  const int64_t C = x.dim(0);
  Tensor out = Tensor::zeros(Shape{C, grid[0], grid[1], grid[2]});
  const float* px = x.data<float>();
  float* po = out.mutable_data<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t f = 0; f < grid[0]; ++f) {
      const int64_t sf = f == 0 ? 0 : 1 + nearest(from[0] - 1, grid[0] - 1, f - 1);
      for (int64_t h = 0; h < grid[1]; ++h) {
        const int64_t sh = nearest(from[1], grid[1], h);
        for (int64_t w = 0; w < grid[2]; ++w)
          po[((c * grid[0] + f) * grid[1] + h) * grid[2] + w] =
              px[((c * from[0] + sf) * from[1] + sh) * from[2] + nearest(from[2], grid[2], w)];
      }
    }
  return out;
}

Tensor renoise(const Tensor& x0_in, const Tensor& noise_in, float sigma) {
  VIDAX_CHECK(x0_in.shape() == noise_in.shape(), "renoise: ", x0_in.shape().str(), " vs ",
              noise_in.shape().str());
  const Tensor x0 = x0_in.to(DType::kF32).contiguous();
  const Tensor n = noise_in.to(DType::kF32).contiguous();
  Tensor out = Tensor::zeros(x0.shape());
  const float* a = x0.data<float>();
  const float* b = n.data<float>();
  float* o = out.mutable_data<float>();
  const float keep = 1.0f - sigma;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float signal = keep * a[i];
    const float noise = sigma * b[i];
    o[i] = signal + noise;
  }
  return out;
}

Tensor data_prediction(const Tensor& x_in, const Tensor& v_in, float sigma) {
  VIDAX_CHECK(x_in.shape() == v_in.shape(), "data_prediction: ", x_in.shape().str(), " vs ",
              v_in.shape().str());
  const Tensor x = x_in.to(DType::kF32).contiguous();
  const Tensor v = v_in.to(DType::kF32).contiguous();
  Tensor out = Tensor::zeros(x.shape());
  const float* px = x.data<float>();
  const float* pv = v.data<float>();
  float* o = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float sv = sigma * pv[i];
    o[i] = px[i] - sv;
  }
  return out;
}

}  // namespace vidax::accel
