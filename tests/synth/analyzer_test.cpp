// The analyzer on ground-truth renders, on degraded renders, and on clips that do not match
// their caption (it must say so).
#include "synth/analyzer.h"

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "support/test_support.h"
#include "synth/perturb.h"
#include "synth/render.h"

namespace vidax::synth {
namespace {

constexpr int kClips = 300;

AdherenceTally tally(const std::string& kind, int clips, uint64_t first_seed,
                     Layout layout = Layout::kRandom) {
  AdherenceTally t;
  for (int i = 0; i < clips; ++i) {
    const SceneSpec s = sample_scene(first_seed + static_cast<uint64_t>(i), layout);
    // Ground truth is analysed as bytes (what the dataset holds); degraded clips as float video.
    const Tensor video = kind == "none"
                             ? render_rgb8(s, kTinyGeometry)
                             : perturb(render(s, 256, 256, 17), kind, 1000 + s.seed, "perturb");
    const AdherenceScore sc = score(s, video);
    if (!sc.overall) {
      std::printf("  [%s] seed %llu wrong: %s  ->", kind.c_str(),
                  static_cast<unsigned long long>(s.seed), caption(s).c_str());
      for (const auto& o : sc.analysis.objects)
        std::printf(
            " {%s %s %s fill %.2f dx %.2f dy %.2f area %.2f exc %.2f}",
            std::string(object_colors()[static_cast<size_t>(o.attributes.color)].name).c_str(),
            std::string(shape_name(o.attributes.shape)).c_str(),
            std::string(motion_name(o.attributes.motion)).c_str(), o.fill, o.dx, o.dy, o.area_ratio,
            o.excursion);
      std::printf("\n");
    }
    t.add(sc);
  }
  std::printf("%s, %d clips: %s\n", kind.c_str(), clips, t.summary().c_str());
  return t;
}

void expect_high(const AdherenceTally& t, double floor) {
  EXPECT_GE(t.rate(t.color), floor);
  EXPECT_GE(t.rate(t.shape), floor);
  EXPECT_GE(t.rate(t.motion), floor);
  EXPECT_GE(t.rate(t.background), floor);
  EXPECT_GE(t.rate(t.count), floor);
}

TEST(Analyzer, GroundTruthAccuracy) {
  const auto start = std::chrono::steady_clock::now();
  expect_high(tally("none", kClips, 0), 0.98);
  std::printf("%.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Models trained on the canonical layout are scored by the same analyzer, so it must read it.
TEST(Analyzer, GroundTruthAccuracyOnTheCanonicalLayout) {
  expect_high(tally("none", 100, 7000000, Layout::kCanonical), 0.98);
}

// And the large layout (larger objects, shorter travel), for models trained on it.
TEST(Analyzer, GroundTruthAccuracyOnTheLargeLayout) {
  expect_high(tally("none", 100, 7000000, Layout::kLarge), 0.98);
}

TEST(Analyzer, RobustToNoise) { expect_high(tally("noise", 30, 5000), 0.95); }
TEST(Analyzer, RobustToBlur) { expect_high(tally("blur", 40, 6000), 0.95); }
TEST(Analyzer, RobustToJpeg) { expect_high(tally("jpeg", 40, 7000), 0.95); }

TEST(Analyzer, FloatAndByteFramesGiveTheSameVerdict) {
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const SceneSpec s = sample_scene(seed);
    const Analysis a = analyze(render_rgb8(s, {128, 128, 9}));
    const Analysis b = analyze(render(s, 128, 128, 9));
    ASSERT_EQ(a.objects.size(), b.objects.size());
    EXPECT_EQ(a.background, b.background);
    for (size_t i = 0; i < a.objects.size(); ++i) {
      EXPECT_EQ(a.objects[i].attributes, b.objects[i].attributes);
      EXPECT_EQ(a.objects[i].pixels, b.objects[i].pixels);
    }
  }
}

// A clip scored against a caption that is wrong in exactly one attribute: that attribute and
// `overall` must be wrong, the others right.
TEST(Analyzer, WrongCaptionAttributesAreCaught) {
  const int nc = static_cast<int>(object_colors().size());
  const int nb = static_cast<int>(background_colors().size());
  for (uint64_t seed = 100; seed < 160; ++seed) {
    const SceneSpec s = sample_scene(seed);
    const Analysis found = analyze(render_rgb8(s, kTinyGeometry));
    const SceneAttributes truth = attributes(s);
    ASSERT_TRUE(score(truth, found).overall) << seed;
    for (int kind = 0; kind < 4; ++kind) {
      SceneAttributes wrong = truth;
      ObjectAttributes& o = wrong.objects.back();
      if (kind == 0) {  // a colour neither object has
        do o.color = (o.color + 1) % nc;
        while (o.color == truth.objects.front().color || o.color == truth.objects.back().color);
      } else if (kind == 1) {
        o.shape = static_cast<ShapeKind>((static_cast<int>(o.shape) + 1) % kNumShapes);
      } else if (kind == 2) {
        o.motion = static_cast<Motion>((static_cast<int>(o.motion) + 1) % kNumMotions);
      } else {
        wrong.background = (wrong.background + 1) % nb;
      }
      const AdherenceScore sc = score(wrong, found);
      EXPECT_FALSE(sc.overall) << seed << " kind " << kind;
      EXPECT_EQ(sc.color, kind != 0) << seed << " kind " << kind;
      EXPECT_EQ(sc.shape, kind != 1) << seed << " kind " << kind;
      EXPECT_EQ(sc.motion, kind != 2) << seed << " kind " << kind;
      EXPECT_EQ(sc.background, kind != 3) << seed << " kind " << kind;
    }
  }
}

// Clips rendered wrongly (the object goes the other way, has another colour) are scored wrong
// against the caption of the right clip.
TEST(Analyzer, WrongClipsAreCaught) {
  int reversed = 0, recoloured = 0;
  for (uint64_t seed = 200; seed < 260; ++seed) {
    const SceneSpec s = sample_scene(seed);
    SceneSpec bad = s;
    ObjectSpec& o = bad.objects.front();
    if (o.x0 != o.x1 || o.y0 != o.y1 || o.size0 != o.size1) {
      std::swap(o.x0, o.x1), std::swap(o.y0, o.y1), std::swap(o.size0, o.size1);
      const AdherenceScore sc = score(s, render_rgb8(bad, kTinyGeometry));
      EXPECT_FALSE(sc.motion) << seed << ": " << caption(s);
      EXPECT_FALSE(sc.overall);
      EXPECT_TRUE(sc.color && sc.shape && sc.background) << seed;
      ++reversed;
      o = s.objects.front();
    }
    do o.color = (o.color + 3) % static_cast<int>(object_colors().size());
    while (o.color == s.objects.back().color);
    const AdherenceScore sc = score(s, render_rgb8(bad, kTinyGeometry));
    EXPECT_FALSE(sc.color) << seed;
    EXPECT_TRUE(sc.shape && sc.motion && sc.background) << seed;
    ++recoloured;
  }
  EXPECT_GT(reversed, 20);
  EXPECT_EQ(recoloured, 60);
}

TEST(Analyzer, EmptyClipHasNoObjects) {
  SceneSpec s = sample_scene(1);
  const SceneAttributes want = attributes(s);
  s.objects.clear();
  const Tensor empty = render_rgb8(s, {64, 64, 5});
  const AdherenceScore sc = score(want, empty);
  EXPECT_TRUE(sc.analysis.objects.empty());
  EXPECT_TRUE(sc.background);
  EXPECT_FALSE(sc.count || sc.color || sc.shape || sc.motion || sc.overall);
}

TEST(Analyzer, RejectsFramesOfTheWrongKind) {
  EXPECT_THROW(analyze(Tensor::zeros(Shape{3, 2, 16})), InputError);
  EXPECT_THROW(analyze(Tensor::zeros(Shape{4, 2, 16, 16})), InputError);
  EXPECT_THROW(analyze(Tensor::zeros(Shape{2, 16, 16, 4}, DType::kU8)), InputError);
  EXPECT_THROW(analyze(Tensor::zeros(Shape{3, 2, 4, 4})), InputError);  // too small
  EXPECT_THROW(analyze(Tensor::zeros(Shape{2, 16, 16}, DType::kI32)), InputError);
}

}  // namespace
}  // namespace vidax::synth
