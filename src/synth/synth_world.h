// The synthetic video world that vidax-tiny is trained on and judged by: scenes of one or two
// flat-coloured objects (circle, square, triangle) that move left/right/up/down, bounce, grow,
// shrink or stay still on a plain background. A scene is fully determined by a 64-bit seed
// through a PRNG written here (splitmix64), and every coordinate is an integer, so the same seed
// gives the same scene -- and, through render.h, the same bytes -- on any machine and compiler.
//
// Geometry is resolution independent: positions are in permille of the frame width/height and
// sizes in permille of min(width, height); sample_scene keeps every object inside a square frame
// with a margin, which keeps it inside any other aspect ratio too (the larger side only gains
// room). Two objects never come closer than a gap, so the analyzer can tell them apart.
//
// All functions are pure; safe to call from any number of threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vidax::synth {

// Bumped whenever sample_scene, caption or render change what a seed produces; recorded in
// dataset manifests so a dataset can be regenerated or rejected.
inline constexpr int kGeneratorVersion = 1;

struct Rgb8 {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb8&) const = default;
};

struct NamedColor {
  std::string_view name;
  Rgb8 rgb;
};

// Object colours are saturated (and white), backgrounds dark or mid gray, so every object
// colour is far from every background in RGB.
std::span<const NamedColor> object_colors();
std::span<const NamedColor> background_colors();

enum class ShapeKind : uint8_t { kCircle, kSquare, kTriangle };
inline constexpr int kNumShapes = 3;
enum class Motion : uint8_t { kLeft, kRight, kUp, kDown, kBounce, kGrow, kShrink, kStill };
inline constexpr int kNumMotions = 8;

std::string_view shape_name(ShapeKind shape);  // "circle"
std::string_view motion_name(Motion motion);   // "left", "bounce", "grow", ...

// One object. The centre at normalised time t in [0, 1] is
//   x = lerp(x0, x1, t),  y = lerp(y0, y1, t) + bounce_depth * (1 - (2t - 1)^2)
// (y grows downwards, so a bounce falls from y0, touches its lowest point at t = 1/2 and rises
// back like a ball leaving the floor) and the half-size is lerp(size0, size1, t).
struct ObjectSpec {
  int color = 0;  // index into object_colors()
  ShapeKind shape = ShapeKind::kCircle;
  Motion motion = Motion::kStill;
  int phrase = 0;                                  // which wording of the motion the caption uses
  int32_t x0 = 500, y0 = 500, x1 = 500, y1 = 500;  // centre, permille of width / height
  int32_t size0 = 100, size1 = 100;                // half-size, permille of min(width, height)
  int32_t bounce_depth = 0;                        // permille of height; > 0 only for kBounce
  bool operator==(const ObjectSpec&) const = default;
};

struct SceneSpec {
  uint64_t seed = 0;
  int background = 0;               // index into background_colors()
  int sentence = 0;                 // which caption template
  std::vector<ObjectSpec> objects;  // 1 or 2; objects[1] is drawn over objects[0]
  bool operator==(const SceneSpec&) const = default;
};

// What a caption says: the part of a scene that prompt adherence is judged on.
struct ObjectAttributes {
  int color = 0;
  ShapeKind shape = ShapeKind::kCircle;
  Motion motion = Motion::kStill;
  bool operator==(const ObjectAttributes&) const = default;
};
struct SceneAttributes {
  int background = 0;
  std::vector<ObjectAttributes> objects;
  bool operator==(const SceneAttributes&) const = default;
};

// How sample_scene places the objects.
//   kRandom: centres, sizes, travel and bounce depth drawn from the seed -- the world the
//     analyzer is validated on and vidax-tiny's VAE is trained on.
//   kCanonical: the same attributes and caption as kRandom for that seed, but the geometry is a
//     function of the caption alone: one object is centred, two sit in the top-left and
//     bottom-right quadrants (first-named object top-left), each with a fixed size per count and
//     a fixed travel about its slot. An easier world for training experiments (a DiT need not
//     learn where to place objects); vidax-tiny's DiT trained on it did no better than on
//     random placement, since Wan's DiT has no absolute position signal (RoPE is relative) and
//     so cannot put content at a fixed place from pure noise (docs/vidax-tiny.md). The shipped
//     model uses kRandom.
//   kLarge: the same attributes and caption as kRandom for that seed; the geometry is drawn
//     again (its own PRNG stream) with ~1.5x the half-sizes and shorter travel (alone: 130-180
//     permille instead of 80-140). Small shapes are where vidax-tiny's VAE rounds corners (all
//     of its round-trip misses are two-object scenes) and its DiT draws circles, at 3-4 tokens
//     across; larger objects give both more room (docs/vidax-tiny.md).
enum class Layout : uint8_t { kRandom, kCanonical, kLarge };
std::string_view layout_name(Layout layout);  // "random", "canonical", "large"
// InputError naming `flag` and the accepted names.
Layout parse_layout(std::string_view text, std::string_view flag);

SceneSpec sample_scene(uint64_t seed, Layout layout = Layout::kRandom);
SceneAttributes attributes(const SceneSpec& scene);

// "a red square moves to the left on a dark blue background"; the sentence template and the
// motion wordings come from the spec (chosen by the seed).
std::string caption(const SceneSpec& scene);
// The attributes named by a caption: any template caption() produces plus a few synonyms, case
// and punctuation insensitive. InputError naming the text when a colour, shape, motion or the
// background cannot be found.
SceneAttributes parse_caption(std::string_view text);
std::string describe(const SceneAttributes& attributes);  // "red square left + ... / gray"

// Half-extent of a shape of half-size 1 (its bounding box is centre +- extent * size); used to
// keep objects in frame and apart.
inline constexpr int32_t kExtentPermille = 1200;

// The deterministic PRNG behind sample_scene (splitmix64), exposed for tests and for other
// seeded choices that must not depend on the standard library.
class SynthRng {
 public:
  explicit SynthRng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform integer in [lo, hi] (inclusive) by 128-bit multiply-shift; lo <= hi.
  int32_t uniform(int32_t lo, int32_t hi);

 private:
  uint64_t state_;
};

}  // namespace vidax::synth
