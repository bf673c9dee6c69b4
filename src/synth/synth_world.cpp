// Palettes, the splitmix64 PRNG and scene sampling. Everything here is integer arithmetic so a
// seed means the same scene everywhere.
#include "synth/synth_world.h"

#include <algorithm>
#include <array>
#include <cstdlib>

#include "core/error.h"

namespace vidax::synth {
namespace {

// Saturated colours at least ~95 apart in RGB from each other and ~145 from every background.
constexpr std::array<NamedColor, 8> kObjectColors = {{
    {"red", {220, 30, 30}},
    {"orange", {255, 140, 0}},
    {"yellow", {240, 230, 40}},
    {"green", {30, 190, 50}},
    {"cyan", {30, 210, 220}},
    {"blue", {40, 80, 245}},
    {"purple", {160, 50, 220}},
    {"white", {245, 245, 245}},
}};

constexpr std::array<NamedColor, 5> kBackgroundColors = {{
    {"black", {0, 0, 0}},
    {"dark blue", {15, 20, 75}},
    {"dark green", {10, 55, 25}},
    {"gray", {110, 110, 110}},
    {"dark red", {75, 10, 15}},
}};

// Layout constants, permille.
constexpr int32_t kMargin = 30;  // between an object's box and the frame edge
constexpr int32_t kGap = 40;     // between the boxes of two objects, at every time
constexpr int kMaxTries = 400;

int32_t extent(int32_t size) { return size * kExtentPermille / 1000; }

// Range of centre positions that keeps a box of half-extent `ext` inside the frame margin.
struct Range {
  int32_t lo, hi;
};
Range centre_range(int32_t ext) { return {kMargin + ext, 1000 - kMargin - ext}; }

// Ranges sample_geometry draws from (permille), for an object alone or one of a pair.
struct GeometryRanges {
  int32_t size_lo, size_hi;      // half-size of an object that keeps its size
  int32_t grow_lo, grow_hi;      // smaller half-size of a growing / shrinking object
  int32_t travel_lo, travel_hi;  // distance travelled (bounce depth: 50 less)
};
// kRandom: the world the analyzer is validated on and vidax-tiny's VAE is trained on.
constexpr GeometryRanges kRandomAlone = {80, 140, 45, 65, 300, 450};
constexpr GeometryRanges kRandomPair = {60, 110, 40, 55, 250, 400};
// kLarge: ~1.5x the half-sizes with shorter travel, so the largest object still has travel_hi
// + 100 of room (the check below). Alone: 33-46 px radius at 256x256 (4-6 DiT tokens across).
constexpr GeometryRanges kLargeAlone = {130, 180, 70, 90, 250, 370};
constexpr GeometryRanges kLargePair = {100, 135, 55, 70, 250, 320};

ObjectSpec sample_geometry(SynthRng& rng, ObjectSpec o, bool pair, bool large_layout = false) {
  const GeometryRanges& g =
      large_layout ? (pair ? kLargePair : kLargeAlone) : (pair ? kRandomPair : kRandomAlone);
  const int32_t small = g.size_lo, large = g.size_hi;
  const int32_t travel_lo = g.travel_lo, travel_hi = g.travel_hi;
  o.bounce_depth = 0;
  switch (o.motion) {
    case Motion::kGrow:
    case Motion::kShrink: {
      const int32_t s0 = rng.uniform(g.grow_lo, g.grow_hi);
      const int32_t s1 = s0 * rng.uniform(170, 200) / 100;
      o.size0 = o.motion == Motion::kGrow ? s0 : s1;
      o.size1 = o.motion == Motion::kGrow ? s1 : s0;
      break;
    }
    default:
      o.size0 = o.size1 = rng.uniform(small, large);
  }
  const Range r = centre_range(extent(std::max(o.size0, o.size1)));
  VIDAX_CHECK(r.hi - r.lo >= travel_hi + 100, "object too large for the frame");
  o.x0 = rng.uniform(r.lo, r.hi);
  o.y0 = rng.uniform(r.lo, r.hi);
  o.x1 = o.x0;
  o.y1 = o.y0;
  switch (o.motion) {
    case Motion::kLeft:
    case Motion::kRight:
    case Motion::kUp:
    case Motion::kDown: {
      const int32_t d = rng.uniform(travel_lo, travel_hi);
      const int32_t start = rng.uniform(r.lo, r.hi - d);  // lower end of the travelled span
      const bool forward = o.motion == Motion::kRight || o.motion == Motion::kDown;
      const int32_t from = forward ? start : start + d, to = forward ? start + d : start;
      if (o.motion == Motion::kLeft || o.motion == Motion::kRight) {
        o.x0 = from;
        o.x1 = to;
      } else {
        o.y0 = from;
        o.y1 = to;
      }
      break;
    }
    case Motion::kBounce:
      o.bounce_depth = rng.uniform(travel_lo - 50, travel_hi - 50);
      o.y0 = o.y1 = rng.uniform(r.lo, r.hi - o.bounce_depth);
      break;
    default:
      break;
  }
  return o;
}

// Centre and half-size at t = k / 32, all scaled by 1024 so the arithmetic stays exact.
struct Pose {
  int64_t x, y, size;
};
Pose pose_at(const ObjectSpec& o, int64_t k) {
  const int64_t u = 2 * k - 32;
  return {int64_t{o.x0} * 1024 + int64_t{o.x1 - o.x0} * k * 32,
          int64_t{o.y0} * 1024 + int64_t{o.y1 - o.y0} * k * 32 +
              int64_t{o.bounce_depth} * (1024 - u * u),
          int64_t{o.size0} * 1024 + int64_t{o.size1 - o.size0} * k * 32};
}

// Boxes (plus the gap) are disjoint at 33 times; objects move < 15 permille between two of them,
// well under the gap, so they are disjoint at every time in between too.
bool apart(const ObjectSpec& a, const ObjectSpec& b) {
  for (int64_t k = 0; k <= 32; ++k) {
    const Pose p = pose_at(a, k), q = pose_at(b, k);
    const int64_t reach = (p.size + q.size) * kExtentPermille / 1000 + int64_t{kGap} * 1024;
    if (std::llabs(p.x - q.x) < reach && std::llabs(p.y - q.y) < reach) return false;
  }
  return true;
}

// kCanonical geometry of an object in slot 0 (alone: the centre; in a pair: the top-left
// quadrant) or slot 1 (the bottom-right quadrant). Sizes, travel and bounce depth sit inside
// sample_geometry's ranges, so a canonical scene is also a possible random one.
ObjectSpec canonical_geometry(ObjectSpec o, int slot, bool pair) {
  const int32_t cx = pair ? (slot == 0 ? 300 : 700) : 500, cy = cx;
  const int32_t half_travel = pair ? 150 : 200;  // travel 300 (pair) or 400 permille
  o.size0 = o.size1 = pair ? 80 : 100;
  o.x0 = o.x1 = cx;
  o.y0 = o.y1 = cy;
  o.bounce_depth = 0;
  switch (o.motion) {
    case Motion::kLeft:
      o.x0 = cx + half_travel;
      o.x1 = cx - half_travel;
      break;
    case Motion::kRight:
      o.x0 = cx - half_travel;
      o.x1 = cx + half_travel;
      break;
    case Motion::kUp:
      o.y0 = cy + half_travel;
      o.y1 = cy - half_travel;
      break;
    case Motion::kDown:
      o.y0 = cy - half_travel;
      o.y1 = cy + half_travel;
      break;
    case Motion::kBounce:  // falls from half a travel above the slot to a travel below it
      o.y0 = o.y1 = cy - half_travel;
      o.bounce_depth = pair ? 300 : 350;
      break;
    case Motion::kGrow:
    case Motion::kShrink: {
      const int32_t small = pair ? 45 : 50, large = small * 19 / 10;
      o.size0 = o.motion == Motion::kGrow ? small : large;
      o.size1 = o.motion == Motion::kGrow ? large : small;
      break;
    }
    case Motion::kStill:
      break;
  }
  return o;
}

ObjectSpec sample_object(SynthRng& rng, int color, bool pair) {
  ObjectSpec o;
  o.color = color;
  o.shape = static_cast<ShapeKind>(rng.uniform(0, kNumShapes - 1));
  o.motion = static_cast<Motion>(rng.uniform(0, kNumMotions - 1));
  o.phrase = rng.uniform(0, 1);
  return sample_geometry(rng, o, pair);
}

}  // namespace

std::span<const NamedColor> object_colors() { return kObjectColors; }
std::span<const NamedColor> background_colors() { return kBackgroundColors; }

std::string_view shape_name(ShapeKind shape) {
  switch (shape) {
    case ShapeKind::kCircle:
      return "circle";
    case ShapeKind::kSquare:
      return "square";
    case ShapeKind::kTriangle:
      return "triangle";
  }
  return "?";
}

std::string_view motion_name(Motion motion) {
  switch (motion) {
    case Motion::kLeft:
      return "left";
    case Motion::kRight:
      return "right";
    case Motion::kUp:
      return "up";
    case Motion::kDown:
      return "down";
    case Motion::kBounce:
      return "bounce";
    case Motion::kGrow:
      return "grow";
    case Motion::kShrink:
      return "shrink";
    case Motion::kStill:
      return "still";
  }
  return "?";
}

uint64_t SynthRng::next() {
  // splitmix64 (Steele, Lea, Flood 2014): a fixed, well-mixed sequence from any 64-bit state.
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int32_t SynthRng::uniform(int32_t lo, int32_t hi) {
  VIDAX_CHECK(lo <= hi, "empty range [", lo, ", ", hi, "]");
  const uint64_t n = static_cast<uint64_t>(int64_t{hi} - lo + 1);
  const auto r = static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  return static_cast<int32_t>(lo + static_cast<int64_t>(r));
}

std::string_view layout_name(Layout layout) {
  switch (layout) {
    case Layout::kRandom:
      return "random";
    case Layout::kCanonical:
      return "canonical";
    case Layout::kLarge:
      return "large";
  }
  return "?";
}

Layout parse_layout(std::string_view text, std::string_view flag) {
  if (text == "random") return Layout::kRandom;
  if (text == "canonical") return Layout::kCanonical;
  if (text == "large") return Layout::kLarge;
  throw_input_error(flag, ": expected random, canonical or large, got '", text, "'");
}

SceneSpec sample_scene(uint64_t seed, Layout layout) {
  if (layout == Layout::kLarge) {
    // The random scene's attributes, sentence and phrasing; the geometry is drawn again from
    // the large ranges with a PRNG of its own.
    SceneSpec s = sample_scene(seed, Layout::kRandom);
    SynthRng rng(seed ^ 0x1a7e1a7e1a7e1a7eull);
    if (s.objects.size() == 1) {
      s.objects[0] = sample_geometry(rng, s.objects[0], false, true);
      return s;
    }
    for (int attempt = 0; attempt < kMaxTries; ++attempt) {
      const ObjectSpec a = sample_geometry(rng, s.objects[0], true, true);
      ObjectSpec b = sample_geometry(rng, s.objects[1], true, true);
      for (int t = 0; t < kMaxTries && !apart(a, b); ++t) b = sample_geometry(rng, b, true, true);
      if (apart(a, b)) {
        s.objects = {a, b};
        return s;
      }
    }
    VIDAX_CHECK(false, "could not place two large objects apart for seed ", seed);
    return s;
  }
  if (layout == Layout::kCanonical) {
    // The random scene's attributes, sentence and phrasing; only the geometry is replaced.
    SceneSpec s = sample_scene(seed, Layout::kRandom);
    const bool pair = s.objects.size() == 2;
    for (size_t i = 0; i < s.objects.size(); ++i)
      s.objects[i] = canonical_geometry(s.objects[i], static_cast<int>(i), pair);
    VIDAX_CHECK(!pair || apart(s.objects[0], s.objects[1]), "canonical slots overlap, seed ", seed);
    return s;
  }
  SceneSpec s;
  s.seed = seed;
  // A fixed offset keeps seed 0 away from splitmix's all-zero start.
  SynthRng rng(seed ^ 0x5eed5eed5eed5eedull);
  s.background = rng.uniform(0, static_cast<int32_t>(kBackgroundColors.size()) - 1);
  s.sentence = rng.uniform(0, 2);
  const bool pair = rng.uniform(0, 1) == 1;
  const int ncolors = static_cast<int>(kObjectColors.size());
  const int c0 = rng.uniform(0, ncolors - 1);
  if (!pair) {
    s.objects.push_back(sample_object(rng, c0, false));
    return s;
  }
  // The second colour differs from the first: the analyzer separates objects by colour.
  const int c1 = (c0 + rng.uniform(1, ncolors - 1)) % ncolors;
  for (int attempt = 0; attempt < kMaxTries; ++attempt) {
    const ObjectSpec a = sample_object(rng, c0, true);
    ObjectSpec b = sample_object(rng, c1, true);
    for (int t = 0; t < kMaxTries && !apart(a, b); ++t) b = sample_geometry(rng, b, true);
    if (apart(a, b)) {
      s.objects = {a, b};
      return s;
    }
  }
  VIDAX_CHECK(false, "could not place two objects apart for seed ", seed);
  return s;
}

SceneAttributes attributes(const SceneSpec& scene) {
  SceneAttributes a;
  a.background = scene.background;
  for (const auto& o : scene.objects) a.objects.push_back({o.color, o.shape, o.motion});
  return a;
}

std::string describe(const SceneAttributes& a) {
  std::string out;
  for (const auto& o : a.objects) {
    if (!out.empty()) out += " + ";
    out += str_cat(object_colors()[static_cast<size_t>(o.color)].name, " ", shape_name(o.shape),
                   " ", motion_name(o.motion));
  }
  return out + " / " + std::string(background_colors()[static_cast<size_t>(a.background)].name);
}

}  // namespace vidax::synth
