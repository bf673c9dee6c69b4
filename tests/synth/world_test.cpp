// Scene sampling, captions and their parser: determinism, coverage, round trips, errors.
#include "synth/synth_world.h"

#include <array>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax::synth {
namespace {

TEST(SynthRng, IsSplitmix64) {
  // Reference outputs of splitmix64 from state 0 (Vigna's splitmix64.c).
  SynthRng rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.next(), 0x06c45d188009454full);
}

TEST(SynthRng, UniformStaysInRangeAndHitsBothEnds) {
  SynthRng rng(42);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const int32_t v = rng.uniform(-3, 4);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 4);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(rng.uniform(7, 7), 7);
}

TEST(SampleScene, SameSeedSameSceneOtherSeedOtherScene) {
  for (uint64_t seed : {0ull, 1ull, 12345ull, 0xffffffffffffffffull}) {
    const SceneSpec a = sample_scene(seed), b = sample_scene(seed);
    EXPECT_EQ(a, b) << seed;
    EXPECT_EQ(caption(a), caption(b));
  }
  int same = 0;
  for (uint64_t s = 0; s < 200; ++s) same += sample_scene(s) == sample_scene(s + 1000) ? 1 : 0;
  EXPECT_EQ(same, 0);
}

TEST(SampleScene, CoversEveryAttribute) {
  std::set<int> colors, backgrounds, shapes, motions, counts, sentences, phrases;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const SceneSpec s = sample_scene(seed);
    ASSERT_GE(s.objects.size(), 1u);
    ASSERT_LE(s.objects.size(), 2u);
    backgrounds.insert(s.background);
    counts.insert(static_cast<int>(s.objects.size()));
    sentences.insert(s.sentence);
    for (const auto& o : s.objects) {
      colors.insert(o.color);
      shapes.insert(static_cast<int>(o.shape));
      motions.insert(static_cast<int>(o.motion));
      phrases.insert(static_cast<int>(o.motion) * 2 + o.phrase);
    }
    if (s.objects.size() == 2) {
      EXPECT_NE(s.objects[0].color, s.objects[1].color) << seed;
    }
  }
  EXPECT_EQ(colors.size(), object_colors().size());
  EXPECT_GE(colors.size(), 6u);
  EXPECT_EQ(backgrounds.size(), background_colors().size());
  EXPECT_EQ(shapes.size(), static_cast<size_t>(kNumShapes));
  EXPECT_EQ(motions.size(), static_cast<size_t>(kNumMotions));
  EXPECT_EQ(phrases.size(), static_cast<size_t>(2 * kNumMotions));
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ(sentences.size(), 3u);
}

class SampleSceneLayout : public ::testing::TestWithParam<Layout> {};

TEST_P(SampleSceneLayout, MotionParametersMatchTheMotion) {
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    for (const auto& o : sample_scene(seed, GetParam()).objects) {
      const int dx = o.x1 - o.x0, dy = o.y1 - o.y0, ds = o.size1 - o.size0;
      switch (o.motion) {
        case Motion::kLeft:
          EXPECT_TRUE(dx <= -250 && dy == 0 && ds == 0) << seed;
          break;
        case Motion::kRight:
          EXPECT_TRUE(dx >= 250 && dy == 0 && ds == 0) << seed;
          break;
        case Motion::kUp:
          EXPECT_TRUE(dy <= -250 && dx == 0 && ds == 0) << seed;
          break;
        case Motion::kDown:
          EXPECT_TRUE(dy >= 250 && dx == 0 && ds == 0) << seed;
          break;
        case Motion::kBounce:
          EXPECT_TRUE(o.bounce_depth >= 200 && dx == 0 && dy == 0 && ds == 0) << seed;
          break;
        case Motion::kGrow:
          EXPECT_TRUE(o.size1 * 10 >= o.size0 * 16 && dx == 0 && dy == 0) << seed;
          break;
        case Motion::kShrink:
          EXPECT_TRUE(o.size0 * 10 >= o.size1 * 16 && dx == 0 && dy == 0) << seed;
          break;
        case Motion::kStill:
          EXPECT_TRUE(dx == 0 && dy == 0 && ds == 0) << seed;
          break;
      }
      if (o.motion != Motion::kBounce) {
        EXPECT_EQ(o.bounce_depth, 0);
      }
    }
  }
}

// Every box (centre +- extent * size, sampled at 33 times as the sampler checks) stays inside
// the frame margin, and two objects never come within the gap of each other.
TEST_P(SampleSceneLayout, ObjectsStayInFrameAndApart) {
  constexpr int64_t kMargin = 30, kGap = 40;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const SceneSpec s = sample_scene(seed, GetParam());
    for (int k = 0; k <= 32; ++k) {
      const double t = k / 32.0;
      std::vector<std::array<double, 3>> boxes;  // centre x, y, half-extent (permille)
      for (const auto& o : s.objects) {
        const double u = 2 * t - 1;
        const double x = o.x0 + (o.x1 - o.x0) * t;
        const double y = o.y0 + (o.y1 - o.y0) * t + o.bounce_depth * (1 - u * u);
        const double e = (o.size0 + (o.size1 - o.size0) * t) * kExtentPermille / 1000.0;
        ASSERT_GE(x - e, kMargin - 1) << seed;
        ASSERT_LE(x + e, 1000 - kMargin + 1) << seed;
        ASSERT_GE(y - e, kMargin - 1) << seed;
        ASSERT_LE(y + e, 1000 - kMargin + 1) << seed;
        boxes.push_back({x, y, e});
      }
      if (boxes.size() == 2) {
        const double reach = boxes[0][2] + boxes[1][2] + kGap - 1;
        EXPECT_TRUE(std::abs(boxes[0][0] - boxes[1][0]) >= reach ||
                    std::abs(boxes[0][1] - boxes[1][1]) >= reach)
            << seed << " at t " << t;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, SampleSceneLayout,
                         ::testing::Values(Layout::kRandom, Layout::kCanonical, Layout::kLarge),
                         [](const auto& info) { return std::string(layout_name(info.param)); });

TEST(CanonicalLayout, KeepsTheRandomScenesAttributesAndCaption) {
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const SceneSpec r = sample_scene(seed), c = sample_scene(seed, Layout::kCanonical);
    EXPECT_EQ(attributes(c), attributes(r)) << seed;
    EXPECT_EQ(caption(c), caption(r)) << seed;
    EXPECT_EQ(c, sample_scene(seed, Layout::kCanonical)) << seed;
  }
}

// The point of the layout: two scenes whose captions name the same objects in the same order
// draw them in the same place, size and path; the seed only picks the attributes and wording.
TEST(CanonicalLayout, GeometryIsAFunctionOfCountSlotAndMotion) {
  std::map<std::tuple<size_t, size_t, Motion>, ObjectSpec> seen;
  std::set<std::pair<int32_t, int32_t>> slot_centres;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const SceneSpec s = sample_scene(seed, Layout::kCanonical);
    for (size_t i = 0; i < s.objects.size(); ++i) {
      ObjectSpec geometry = s.objects[i];
      geometry.color = 0;
      geometry.shape = ShapeKind::kCircle;
      geometry.phrase = 0;
      const auto key = std::make_tuple(s.objects.size(), i, geometry.motion);
      const auto [it, inserted] = seen.emplace(key, geometry);
      if (!inserted) {
        EXPECT_EQ(it->second, geometry) << seed;
      }
      if (geometry.motion == Motion::kStill) slot_centres.insert({geometry.x0, geometry.y0});
    }
  }
  EXPECT_EQ(seen.size(), 3u * kNumMotions);  // alone, first of two, second of two
  EXPECT_EQ(slot_centres,
            (std::set<std::pair<int32_t, int32_t>>{{500, 500}, {300, 300}, {700, 700}}));
}

TEST(LargeLayout, KeepsTheRandomScenesCaptionWithLargerObjects) {
  double random_sum = 0, large_sum = 0;
  int objects = 0;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const SceneSpec r = sample_scene(seed), l = sample_scene(seed, Layout::kLarge);
    EXPECT_EQ(attributes(l), attributes(r)) << seed;
    EXPECT_EQ(caption(l), caption(r)) << seed;
    EXPECT_EQ(l, sample_scene(seed, Layout::kLarge)) << seed;
    for (size_t i = 0; i < l.objects.size(); ++i) {
      const int32_t lmax = std::max(l.objects[i].size0, l.objects[i].size1);
      // The smallest largest half-size: a grow / shrink from the least start (70 alone, 55 in a
      // pair) at 1.7x.
      EXPECT_GE(lmax, l.objects.size() == 1 ? 119 : 93) << seed;
      random_sum += std::max(r.objects[i].size0, r.objects[i].size1);
      large_sum += lmax;
      ++objects;
    }
  }
  // ~1.5x the random layout's half-sizes on average (the point of the layout).
  EXPECT_GT(large_sum / random_sum, 1.35) << objects;
  EXPECT_LT(large_sum / random_sum, 1.75) << objects;
}

TEST(CanonicalLayout, NamesRoundTripAndUnknownNamesAreInputErrors) {
  for (Layout l : {Layout::kRandom, Layout::kCanonical, Layout::kLarge})
    EXPECT_EQ(parse_layout(layout_name(l), "--layout"), l);
  try {
    parse_layout("grid", "--layout");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("--layout: expected random, canonical or large, got 'grid'"),
        std::string::npos)
        << e.what();
  }
}

TEST(Caption, Examples) {
  SceneSpec s;
  s.background = 1;  // dark blue
  ObjectSpec red_square;
  red_square.color = 0;
  red_square.shape = ShapeKind::kSquare;
  red_square.motion = Motion::kLeft;
  s.objects = {red_square};
  EXPECT_EQ(caption(s), "a red square moves to the left on a dark blue background");
  ObjectSpec green_circle;
  green_circle.color = 3;
  green_circle.shape = ShapeKind::kCircle;
  green_circle.motion = Motion::kGrow;
  s.objects.push_back(green_circle);
  s.background = 3;
  EXPECT_EQ(caption(s),
            "a red square moves to the left and a green circle grows on a gray background");
  s.sentence = 2;
  s.objects[1].color = 1;
  s.objects[1].phrase = 1;
  EXPECT_EQ(
      caption(s),
      "on a gray background, a red square moves to the left and an orange circle gets bigger");
}

TEST(Caption, ParseRoundTripsForAThousandSeeds) {
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const SceneSpec s = sample_scene(seed);
    EXPECT_EQ(parse_caption(caption(s)), attributes(s)) << seed << ": " << caption(s);
  }
}

TEST(Caption, ParsesFreeFormPrompts) {
  const SceneAttributes a = parse_caption("A WHITE disc bounces, on a Dark Green background.");
  ASSERT_EQ(a.objects.size(), 1u);
  EXPECT_EQ(object_colors()[static_cast<size_t>(a.objects[0].color)].name, "white");
  EXPECT_EQ(a.objects[0].shape, ShapeKind::kCircle);
  EXPECT_EQ(a.objects[0].motion, Motion::kBounce);
  EXPECT_EQ(background_colors()[static_cast<size_t>(a.background)].name, "dark green");

  const SceneAttributes b = parse_caption(
      "a blue triangle falls and a yellow box shrinks against a dark blue background");
  ASSERT_EQ(b.objects.size(), 2u);
  EXPECT_EQ(object_colors()[static_cast<size_t>(b.objects[0].color)].name, "blue");
  EXPECT_EQ(b.objects[0].motion, Motion::kDown);
  EXPECT_EQ(b.objects[1].shape, ShapeKind::kSquare);
  EXPECT_EQ(b.objects[1].motion, Motion::kShrink);
  EXPECT_EQ(background_colors()[static_cast<size_t>(b.background)].name, "dark blue");
}

TEST(Caption, UnparsablePromptsAreInputErrors) {
  EXPECT_THROW(parse_caption("a red square moves to the left"), InputError);  // no background
  EXPECT_THROW(parse_caption("a square moves left on a gray background"), InputError);
  EXPECT_THROW(parse_caption("a red thing moves left on a gray background"), InputError);
  EXPECT_THROW(parse_caption("a red square on a gray background"), InputError);  // no motion
  EXPECT_THROW(parse_caption("a red square and a blue circle and a white square grow on a gray "
                             "background"),
               InputError);
  try {
    parse_caption("a purple hexagon spins on a black background");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("purple hexagon"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vidax::synth
