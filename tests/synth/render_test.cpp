// The rasteriser: golden bytes, geometry (in frame, apart, areas), anti-aliasing, conversions.
#include "synth/render.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax::synth {
namespace {

// FNV-1a 64 of render_rgb8 for a few seeds, computed once with this generator (version 1). The
// PRNG and every rendering step are integer arithmetic, so these hold on any machine; a change
// here means datasets made earlier are no longer reproduced (bump kGeneratorVersion).
TEST(Render, GoldenChecksums) {
  struct Case {
    uint64_t seed;
    ClipGeometry g;
    uint64_t sum;
  };
  const Case cases[] = {
      {0, kTinyGeometry, 0xc7bb417e4dc3b6a8ull}, {1, kTinyGeometry, 0xfa763824a99479adull},
      {5, kTinyGeometry, 0x7cc27bb7ee227cb6ull}, {9, kTinyGeometry, 0xd70b8d7b49b0674full},
      {77, {96, 64, 9}, 0xb2e51a988f8a1812ull},
  };
  EXPECT_EQ(kGeneratorVersion, 1);
  for (const auto& c : cases) {
    const uint64_t sum = fnv1a64(render_rgb8(sample_scene(c.seed), c.g));
    EXPECT_EQ(sum, c.sum) << "seed " << c.seed << ": 0x" << std::hex << sum;
  }
}

TEST(Render, SameSceneSameBytes) {
  const SceneSpec s = sample_scene(31);
  const Tensor a = render_rgb8(s, {128, 96, 9}), b = render_rgb8(s, {128, 96, 9});
  ASSERT_EQ(a.shape(), (Shape{9, 96, 128, 3}));
  EXPECT_EQ(fnv1a64(a), fnv1a64(b));
}

TEST(Render, FloatVideoIsTheBytesMappedToMinusOneOne) {
  const SceneSpec s = sample_scene(3);
  const Tensor u8 = render_rgb8(s, {64, 48, 5});
  const Tensor v = render(s, 64, 48, 5);
  ASSERT_EQ(v.shape(), (Shape{3, 5, 48, 64}));
  ASSERT_EQ(v.dtype(), DType::kF32);
  const uint8_t* b = u8.data<uint8_t>();
  const float* f = v.data<float>();
  const int64_t plane = 5 * 48 * 64;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c)
      ASSERT_EQ(f[c * plane + i], (static_cast<float>(b[i * 3 + c]) - 127.5f) / 127.5f);
  EXPECT_EQ(fnv1a64(video_to_rgb8(v)), fnv1a64(u8));
}

bool is_background(const uint8_t* p, const Rgb8& bg) {
  return p[0] == bg.r && p[1] == bg.g && p[2] == bg.b;
}

// Objects never touch the outer pixel ring, in square and in non-square frames.
TEST(Render, ObjectsStayInFrame) {
  for (const ClipGeometry g :
       {ClipGeometry{64, 64, 9}, ClipGeometry{96, 48, 9}, ClipGeometry{48, 96, 9}}) {
    for (uint64_t seed = 0; seed < 1000; ++seed) {
      const SceneSpec s = sample_scene(seed);
      const Rgb8 bg = background_colors()[static_cast<size_t>(s.background)].rgb;
      const Tensor u8 = render_rgb8(s, g);
      const uint8_t* p = u8.data<uint8_t>();
      int touching = 0;
      for (int64_t f = 0; f < g.frames; ++f)
        for (int64_t y = 0; y < g.height; ++y)
          for (int64_t x = 0; x < g.width; ++x)
            if (y == 0 || x == 0 || y == g.height - 1 || x == g.width - 1)
              touching += !is_background(p + ((f * g.height + y) * g.width + x) * 3, bg);
      ASSERT_EQ(touching, 0) << "seed " << seed << " at " << g.width << "x" << g.height;
    }
  }
}

// Two objects never share a pixel: rendered alone, their footprints are disjoint at every frame.
TEST(Render, TwoObjectsStayApart) {
  const ClipGeometry g{64, 64, 17};
  int pairs = 0;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const SceneSpec s = sample_scene(seed);
    if (s.objects.size() != 2) continue;
    ++pairs;
    const Rgb8 bg = background_colors()[static_cast<size_t>(s.background)].rgb;
    SceneSpec a = s, b = s;
    a.objects = {s.objects[0]};
    b.objects = {s.objects[1]};
    const Tensor ra = render_rgb8(a, g), rb = render_rgb8(b, g);
    int shared = 0;
    for (int64_t i = 0; i < ra.numel() / 3; ++i)
      shared += !is_background(ra.data<uint8_t>() + i * 3, bg) &&
                !is_background(rb.data<uint8_t>() + i * 3, bg);
    ASSERT_EQ(shared, 0) << "seed " << seed;
  }
  EXPECT_GT(pairs, 400);
}

// Coverage summed over the frame matches the analytic area (checks supersampling and the
// fast inside/outside paths together), and edges are anti-aliased.
TEST(Render, CoverageMatchesAreaWithSoftEdges) {
  for (ShapeKind shape : {ShapeKind::kCircle, ShapeKind::kSquare, ShapeKind::kTriangle}) {
    SceneSpec s;
    s.background = 0;  // black
    ObjectSpec o;
    o.color = 7;  // white (245): coverage = value / 245
    o.shape = shape;
    o.x0 = o.x1 = 503;
    o.y0 = o.y1 = 497;
    o.size0 = o.size1 = 150;
    s.objects = {o};
    const Tensor u8 = render_rgb8(s, {256, 256, 1});
    double covered = 0;
    int partial = 0;
    for (int64_t i = 0; i < 256 * 256; ++i) {
      const uint8_t v = u8.data<uint8_t>()[i * 3];
      covered += v / 245.0;
      partial += v > 0 && v < 245;
    }
    const double r = 0.150 * 256;
    const double a = std::floor(r * 64 * 886 / 1000) / 64;  // the rasteriser's integer half-side
    const double want = shape == ShapeKind::kCircle   ? std::acos(-1.0) * r * r
                        : shape == ShapeKind::kSquare ? 4 * a * a
                                                      : 2.4 * r * r;
    EXPECT_NEAR(covered, want, want * 0.005) << shape_name(shape);
    EXPECT_GT(partial, 20) << shape_name(shape);
  }
}

TEST(Render, TinyGeometryHasOver1000Tokens) {
  EXPECT_EQ(dit_tokens(kTinyGeometry, "g"), 1280);
  EXPECT_EQ(dit_tokens({832, 480, 81}, "g"), 21 * 30 * 52);
  EXPECT_THROW(dit_tokens({250, 256, 17}, "g"), InputError);
  EXPECT_THROW(dit_tokens({256, 256, 16}, "g"), InputError);
  EXPECT_THROW(render_rgb8(sample_scene(0), {8, 256, 17}), InputError);
  EXPECT_THROW(render_rgb8(sample_scene(0), {256, 256, 0}), InputError);
  EXPECT_THROW(rgb8_to_video(Tensor::zeros(Shape{2, 4, 4, 3})), InputError);  // F32, not U8
}

}  // namespace
}  // namespace vidax::synth
