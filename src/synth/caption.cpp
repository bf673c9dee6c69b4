// Captions from templates, and their parser (the evaluator reads arbitrary suite prompts back
// into attributes with it).
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

#include "core/error.h"
#include "synth/synth_world.h"

namespace vidax::synth {
namespace {

// Two wordings per motion; ObjectSpec::phrase picks one.
constexpr std::array<std::array<std::string_view, 2>, kNumMotions> kMotionPhrases = {{
    {"moves to the left", "slides left"},
    {"moves to the right", "slides right"},
    {"moves up", "rises"},
    {"moves down", "sinks"},
    {"bounces", "bounces up and down"},
    {"grows", "gets bigger"},
    {"shrinks", "gets smaller"},
    {"stays still", "does not move"},
}};

// Words the parser accepts for each motion, tried in this order (the first motion with a match
// wins), so "bounces up and down" is a bounce and not "up".
struct MotionWords {
  Motion motion;
  std::array<std::string_view, 6> words;
};
constexpr std::array<MotionWords, kNumMotions> kMotionWords = {{
    {Motion::kBounce, {"bounces", "bounce", "bouncing", "bounces up and down", "", ""}},
    {Motion::kGrow, {"grows", "grow", "growing", "gets bigger", "expands", "gets larger"}},
    {Motion::kShrink, {"shrinks", "shrink", "shrinking", "gets smaller", "contracts", ""}},
    {Motion::kStill, {"stays still", "does not move", "still", "stationary", "static", ""}},
    {Motion::kLeft, {"left", "leftward", "leftwards", "", "", ""}},
    {Motion::kRight, {"right", "rightward", "rightwards", "", "", ""}},
    {Motion::kUp, {"up", "upward", "upwards", "rises", "rising", ""}},
    {Motion::kDown, {"down", "downward", "downwards", "sinks", "falls", "sinking"}},
}};

struct ShapeWords {
  ShapeKind shape;
  std::array<std::string_view, 3> words;
};
constexpr std::array<ShapeWords, kNumShapes> kShapeWords = {{
    {ShapeKind::kCircle, {"circle", "disc", "disk"}},
    {ShapeKind::kSquare, {"square", "box", ""}},
    {ShapeKind::kTriangle, {"triangle", "", ""}},
}};

// Lower case, every non-alphanumeric run as one space, padded with a space at both ends, so a
// phrase matches as whole words by searching for " phrase ".
std::string normalise(std::string_view text) {
  std::string out = " ";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      out += static_cast<char>(std::tolower(u));
    } else if (out.back() != ' ') {
      out += ' ';
    }
  }
  if (out.back() != ' ') out += ' ';
  return out;
}

// Built by appending: GCC 12 warns falsely (-Wrestrict) about `" " + std::string(...)`.
std::string padded(std::string_view words) {
  std::string s;
  s.reserve(words.size() + 2);
  s += ' ';
  s += words;
  s += ' ';
  return s;
}

size_t find_words(const std::string& text, std::string_view words) {
  if (words.empty()) return std::string::npos;
  return text.find(padded(words));
}

ObjectAttributes parse_object(const std::string& clause, std::string_view original) {
  ObjectAttributes o;
  int colors = 0;
  for (size_t i = 0; i < object_colors().size(); ++i) {
    if (find_words(clause, object_colors()[i].name) != std::string::npos) {
      o.color = static_cast<int>(i);
      ++colors;
    }
  }
  if (colors != 1)
    throw_input_error("caption '", original, "': expected one object colour in '", clause,
                      "', found ", colors);
  bool shape = false;
  for (const auto& s : kShapeWords) {
    for (auto w : s.words) {
      if (!shape && find_words(clause, w) != std::string::npos) {
        o.shape = s.shape;
        shape = true;
      }
    }
  }
  if (!shape)
    throw_input_error("caption '", original, "': no shape (circle, square, triangle) in '", clause,
                      "'");
  for (const auto& m : kMotionWords) {
    for (auto w : m.words) {
      if (find_words(clause, w) != std::string::npos) {
        o.motion = m.motion;
        return o;
      }
    }
  }
  throw_input_error("caption '", original, "': no motion (left, right, up, down, bounces, grows, ",
                    "shrinks, stays still) in '", clause, "'");
}

}  // namespace

std::string caption(const SceneSpec& scene) {
  VIDAX_CHECK(!scene.objects.empty(), "scene without objects");
  std::string objects;
  for (const auto& o : scene.objects) {
    if (!objects.empty()) objects += " and ";
    const std::string_view color = object_colors()[static_cast<size_t>(o.color)].name;
    objects +=
        str_cat(std::string_view("aeiou").find(color[0]) != std::string_view::npos ? "an " : "a ",
                color, " ", shape_name(o.shape), " ",
                kMotionPhrases[static_cast<size_t>(o.motion)][static_cast<size_t>(o.phrase)]);
  }
  const std::string bg =
      str_cat("a ", background_colors()[static_cast<size_t>(scene.background)].name, " background");
  switch (scene.sentence) {
    case 1:
      return objects + " against " + bg;
    case 2:
      return "on " + bg + ", " + objects;
    default:
      return objects + " on " + bg;
  }
}

SceneAttributes parse_caption(std::string_view text) {
  std::string t = normalise(text);
  SceneAttributes a;
  // The background first, longest names first, so "dark blue background" is not read as an
  // object colour "blue".
  std::vector<size_t> order(background_colors().size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [](size_t x, size_t y) {
    return background_colors()[x].name.size() > background_colors()[y].name.size();
  });
  bool found = false;
  for (size_t i : order) {
    const std::string phrase = std::string(background_colors()[i].name) + " background";
    const size_t at = find_words(t, phrase);
    if (at != std::string::npos) {
      a.background = static_cast<int>(i);
      t.erase(at + 1, phrase.size());
      found = true;
      break;
    }
  }
  if (!found)
    throw_input_error("caption '", text, "': no background (e.g. 'on a gray background'; one of ",
                      "black, dark blue, dark green, gray, dark red)");
  // "up and down" is part of one motion, not two clauses.
  for (size_t at; (at = t.find(" up and down ")) != std::string::npos;)
    t.replace(at, 13, " bounces ");
  size_t start = 0;
  while (true) {
    const size_t at = t.find(" and ", start);
    const std::string clause =
        padded(std::string_view(t).substr(start, at == std::string::npos ? at : at - start));
    a.objects.push_back(parse_object(normalise(clause), text));
    if (at == std::string::npos) break;
    start = at + 5;
  }
  if (a.objects.size() > 2)
    throw_input_error("caption '", text, "': at most two objects, found ", a.objects.size());
  return a;
}

}  // namespace vidax::synth
