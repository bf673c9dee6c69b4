// Integer rasteriser for the synthetic world: coverage by 4x4 supersampling in 1/64-pixel
// fixed point, exact compositing in integers.
#include "synth/render.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace vidax::synth {
namespace {

constexpr int64_t kUnit = 64;  // fixed-point units per pixel
constexpr int64_t kNear = 48;  // 0.75 px: beyond this from an edge a pixel is all in or all out
constexpr int kSamples = 16;   // 4x4 per pixel, at 8, 24, 40, 56 units inside the pixel

int64_t div_round(int64_t num, int64_t den) {  // num >= 0, den > 0
  return (num + den / 2) / den;
}

// An object's shape at one frame, in 1/64-pixel units.
struct Placed {
  ShapeKind shape;
  int64_t cx, cy, r;
  // Triangle vertices (apex, base right, base left) and, per edge, |edge|^2.
  int64_t vx[3], vy[3];
  int64_t len2[3];
};

Placed place(const ObjectSpec& o, const ClipGeometry& g, int64_t f) {
  // t = f / d; all three lerps are evaluated over a common denominator and rounded once.
  const int64_t d = std::max<int64_t>(g.frames - 1, 1);
  const int64_t m = std::min(g.width, g.height);
  const int64_t u = 2 * f - d;
  Placed p{};
  p.shape = o.shape;
  p.cx = div_round((int64_t{o.x0} * d + int64_t{o.x1 - o.x0} * f) * g.width * kUnit, 1000 * d);
  p.cy = div_round((int64_t{o.y0} * d * d + int64_t{o.y1 - o.y0} * f * d +
                    int64_t{o.bounce_depth} * (d * d - u * u)) *
                       g.height * kUnit,
                   1000 * d * d);
  p.r = div_round((int64_t{o.size0} * d + int64_t{o.size1 - o.size0} * f) * m * kUnit, 1000 * d);
  if (o.shape == ShapeKind::kTriangle) {
    // Upright: apex 1.1 r above the centre, base 0.9 r below, 2.4 r wide.
    const int64_t hw = p.r * 12 / 10;
    p.vx[0] = p.cx, p.vy[0] = p.cy - p.r * 11 / 10;
    p.vx[1] = p.cx + hw, p.vy[1] = p.cy + p.r * 9 / 10;
    p.vx[2] = p.cx - hw, p.vy[2] = p.cy + p.r * 9 / 10;
    for (int e = 0; e < 3; ++e) {
      const int n = (e + 1) % 3;
      const int64_t ex = p.vx[n] - p.vx[e], ey = p.vy[n] - p.vy[e];
      p.len2[e] = ex * ex + ey * ey;
    }
  }
  return p;
}

// Edge function of edge e at (x, y): positive inside (the vertices run clockwise on screen,
// y pointing down).
int64_t edge(const Placed& p, int e, int64_t x, int64_t y) {
  const int n = (e + 1) % 3;
  return (p.vx[n] - p.vx[e]) * (y - p.vy[e]) - (p.vy[n] - p.vy[e]) * (x - p.vx[e]);
}

bool inside(const Placed& p, int64_t x, int64_t y) {
  const int64_t dx = x - p.cx, dy = y - p.cy;
  switch (p.shape) {
    case ShapeKind::kCircle:
      return dx * dx + dy * dy <= p.r * p.r;
    case ShapeKind::kSquare: {
      const int64_t a = p.r * 886 / 1000;  // sqrt(pi) / 2: same area as the circle
      return std::abs(dx) <= a && std::abs(dy) <= a;
    }
    case ShapeKind::kTriangle:
      return edge(p, 0, x, y) >= 0 && edge(p, 1, x, y) >= 0 && edge(p, 2, x, y) >= 0;
  }
  return false;
}

// -1: the whole pixel around (x, y) is outside, +1: inside, 0: near an edge (supersample).
int classify(const Placed& p, int64_t x, int64_t y) {
  const int64_t dx = x - p.cx, dy = y - p.cy;
  switch (p.shape) {
    case ShapeKind::kCircle: {
      const int64_t d2 = dx * dx + dy * dy;
      if (d2 >= (p.r + kNear) * (p.r + kNear)) return -1;
      if (p.r > kNear && d2 <= (p.r - kNear) * (p.r - kNear)) return 1;
      return 0;
    }
    case ShapeKind::kSquare: {
      const int64_t a = p.r * 886 / 1000;
      const int64_t m = std::max(std::abs(dx), std::abs(dy));
      if (m >= a + kNear) return -1;
      if (m <= a - kNear) return 1;
      return 0;
    }
    case ShapeKind::kTriangle: {
      bool all_in = true;
      for (int e = 0; e < 3; ++e) {
        // Signed distance to the edge line is E / |edge|; compare squares to avoid sqrt.
        const __int128 v = edge(p, e, x, y);
        const __int128 lim = static_cast<__int128>(kNear * kNear) * p.len2[e];
        if (v < 0 && v * v >= lim) return -1;
        if (v < 0 || v * v < lim) all_in = false;
      }
      return all_in ? 1 : 0;
    }
  }
  return -1;
}

int coverage(const Placed& p, int64_t px, int64_t py) {
  const int64_t x0 = px * kUnit, y0 = py * kUnit;
  const int c = classify(p, x0 + kUnit / 2, y0 + kUnit / 2);
  if (c != 0) return c > 0 ? kSamples : 0;
  int k = 0;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 4; ++i) k += inside(p, x0 + 8 + 16 * i, y0 + 8 + 16 * j) ? 1 : 0;
  return k;
}

}  // namespace

void check_geometry(const ClipGeometry& g, const std::string& what) {
  if (g.width < 16 || g.width > 4096 || g.height < 16 || g.height > 4096)
    throw_input_error(what, ": frame size must be between 16 and 4096 pixels, got ", g.width, "x",
                      g.height);
  if (g.frames < 1 || g.frames > 1024)
    throw_input_error(what, ": frame count must be between 1 and 1024, got ", g.frames);
}

int64_t dit_tokens(const ClipGeometry& g, const std::string& what) {
  check_geometry(g, what);
  if (g.width % 16 != 0 || g.height % 16 != 0)
    throw_input_error(what, ": width and height must be multiples of 16 (VAE stride 8 x patch 2),",
                      " got ", g.width, "x", g.height);
  if ((g.frames - 1) % 4 != 0)
    throw_input_error(what, ": frame count must be 4k+1 (VAE temporal stride 4), got ", g.frames);
  return ((g.frames - 1) / 4 + 1) * (g.height / 16) * (g.width / 16);
}

Tensor render_rgb8(const SceneSpec& scene, const ClipGeometry& g) {
  check_geometry(g, "render");
  const int64_t w = g.width, h = g.height;
  Tensor out = Tensor::zeros(Shape{g.frames, h, w, 3}, DType::kU8);  // [F, H, W, 3]
  const Rgb8 bg = background_colors()[static_cast<size_t>(scene.background)].rgb;
  // Colour * 256 (= 16 x 16 coverage steps): compositing k/16 over it stays an exact integer for
  // up to two objects.
  std::vector<int32_t> acc(static_cast<size_t>(h * w * 3));
  for (int64_t f = 0; f < g.frames; ++f) {
    for (size_t i = 0; i < acc.size(); i += 3) {
      acc[i] = bg.r * 256;
      acc[i + 1] = bg.g * 256;
      acc[i + 2] = bg.b * 256;
    }
    for (const ObjectSpec& o : scene.objects) {
      const Placed p = place(o, g, f);
      const Rgb8 c = object_colors()[static_cast<size_t>(o.color)].rgb;
      const int64_t reach = p.r * kExtentPermille / 1000 + kUnit;
      const int64_t xa = std::max<int64_t>(0, (p.cx - reach) / kUnit);
      const int64_t xb = std::min<int64_t>(w - 1, (p.cx + reach) / kUnit);
      const int64_t ya = std::max<int64_t>(0, (p.cy - reach) / kUnit);
      const int64_t yb = std::min<int64_t>(h - 1, (p.cy + reach) / kUnit);
      for (int64_t y = ya; y <= yb; ++y) {
        for (int64_t x = xa; x <= xb; ++x) {
          const int k = coverage(p, x, y);
          if (k == 0) continue;
          int32_t* a = &acc[static_cast<size_t>((y * w + x) * 3)];
          a[0] = (a[0] * (kSamples - k) + c.r * 256 * k) / kSamples;
          a[1] = (a[1] * (kSamples - k) + c.g * 256 * k) / kSamples;
          a[2] = (a[2] * (kSamples - k) + c.b * 256 * k) / kSamples;
        }
      }
    }
    uint8_t* dst = out.mutable_data<uint8_t>() + f * h * w * 3;
    for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<uint8_t>((acc[i] + 128) / 256);
  }
  return out;
}

Tensor render(const SceneSpec& scene, int64_t width, int64_t height, int64_t frames) {
  return rgb8_to_video(render_rgb8(scene, {width, height, frames}));
}

Tensor rgb8_to_video(const Tensor& rgb8) {
  if (rgb8.dtype() != DType::kU8 || rgb8.rank() != 4 || rgb8.dim(3) != 3)
    throw_input_error("frames: expected U8 [F, H, W, 3], got ", rgb8.describe());
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = (static_cast<float>(v) - 127.5f) / 127.5f;
  const Tensor src = rgb8.contiguous();
  const int64_t f = src.dim(0), h = src.dim(1), w = src.dim(2), plane = f * h * w;
  Tensor out = Tensor::zeros(Shape{3, f, h, w});  // [3, F, H, W]
  const uint8_t* s = src.data<uint8_t>();
  float* d = out.mutable_data<float>();
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) d[c * plane + i] = lut[s[i * 3 + c]];
  return out;
}

Tensor video_to_rgb8(const Tensor& video) {
  if (!is_float(video.dtype()) || video.rank() != 4 || video.dim(0) != 3)
    throw_input_error("frames: expected float [3, F, H, W], got ", video.describe());
  const Tensor src = video.to(DType::kF32);
  const int64_t f = src.dim(1), h = src.dim(2), w = src.dim(3), plane = f * h * w;
  Tensor out = Tensor::zeros(Shape{f, h, w, 3}, DType::kU8);  // [F, H, W, 3]
  const float* s = src.data<float>();
  uint8_t* d = out.mutable_data<uint8_t>();
  for (int64_t i = 0; i < plane; ++i) {
    for (int64_t c = 0; c < 3; ++c) {
      const float v = s[c * plane + i] * 127.5f + 127.5f;
      // NaN fails both comparisons and lands on 0.
      // v > 0 here, where truncating v + 0.5 rounds half up.
      d[i * 3 + c] = v > 0.0f ? static_cast<uint8_t>(std::min(v, 255.0f) + 0.5f)  // NOLINT
                              : 0;
    }
  }
  return out;
}

uint64_t fnv1a64(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  uint64_t hsh = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < c.nbytes(); ++i) {
    hsh ^= p[i];
    hsh *= 0x100000001b3ull;
  }
  return hsh;
}

}  // namespace vidax::synth
