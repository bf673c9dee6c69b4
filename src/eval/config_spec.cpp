#include "eval/config_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <set>

#include "accel/step_method.h"
#include "core/error.h"
#include "pipeline/tiny_defaults.h"
#include "sparse/attention_policy.h"

namespace vidax::eval {
namespace {

// Shortest text that reads back to the same double ("5", "0.1", "1e-07").
std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

double parse_number(std::string_view text, const std::string& where) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() ||
      !std::isfinite(v))
    throw_input_error(where, ": expected a number, got '", text, "'");
  return v;
}

int64_t parse_integer(std::string_view text, const std::string& where, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || v < lo || v > hi)
    throw_input_error(where, ": expected an integer in ", lo, "..", hi, ", got '", text, "'");
  return v;
}

struct Key {
  const char* name;
  const char* expected;  // for the unknown-key message
  std::function<void(EvalConfig&, std::string_view, const std::string&)> parse;
  std::function<std::string(const EvalConfig&)> print;
};

// The keys, in canonical order: alphabetical except `accel` and `attention`, last because their
// values (an --accel or --attention spec) may themselves contain commas.
const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      {"frames", "4k+1",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         c.frames = parse_integer(v, where, 1, 10000);
       },
       [](const EvalConfig& c) { return std::to_string(c.frames); }},
      {"guide", ">= 0",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         c.guide = parse_number(v, where);
         if (c.guide < 0) throw_input_error(where, ": expected a number >= 0, got '", v, "'");
       },
       [](const EvalConfig& c) { return number_text(c.guide); }},
      {"precision", "fp32|bf16",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         if (v != "fp32" && v != "bf16")
           throw_input_error(where, ": expected fp32 or bf16, got '", v, "'");
         c.precision = std::string(v);
       },
       [](const EvalConfig& c) { return c.precision; }},
      {"sampler", "unipc|dpm++|euler",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         if (v != "unipc" && v != "dpm++" && v != "euler")
           throw_input_error(where, ": expected unipc, dpm++ or euler, got '", v, "'");
         c.sampler = std::string(v);
       },
       [](const EvalConfig& c) { return c.sampler; }},
      {"shift", "> 0",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         c.shift = parse_number(v, where);
         if (!(c.shift > 0)) throw_input_error(where, ": expected a number > 0, got '", v, "'");
       },
       [](const EvalConfig& c) { return number_text(c.shift); }},
      {"size", "WIDTHxHEIGHT",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         const size_t x = v.find('x');
         if (x == std::string_view::npos)
           throw_input_error(where, ": expected WIDTHxHEIGHT such as 256x256, got '", v, "'");
         c.width = parse_integer(v.substr(0, x), where, 1, 16384);
         c.height = parse_integer(v.substr(x + 1), where, 1, 16384);
       },
       [](const EvalConfig& c) {
         return std::to_string(c.width) + "x" + std::to_string(c.height);
       }},
      {"steps", "1..1000",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         c.steps = static_cast<int>(parse_integer(v, where, 1, 1000));
       },
       [](const EvalConfig& c) { return std::to_string(c.steps); }},
      {"accel", "none",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         // The method and its options are checked against the model when the run is planned
         // (a table may depend on it); here the name.
         const std::string_view name = v.substr(0, v.find(':'));
         const auto& names = accel::step_method_names();
         if (std::find(names.begin(), names.end(), name) == names.end()) {
           std::string known;
           for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
           throw_input_error(where, ": unknown step method '", name, "' (", known, ")");
         }
         c.accel = std::string(v);
       },
       [](const EvalConfig& c) { return c.accel; }},
      {"attention", "dense",
       [](EvalConfig& c, std::string_view v, const std::string& where) {
         // Validated (and canonicalised) by the policy factory: "window:3,8,8", "svg:..", ...
         try {
           c.attention = sparse::make_attention_policy(std::string(v))->name();
         } catch (const InputError& e) {
           throw_input_error(where, ": ", e.what());
         }
       },
       [](const EvalConfig& c) { return c.attention; }},
  };
  return table;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string EvalConfig::canonical() const {
  std::string out;
  for (const Key& k : keys()) {
    // No step method is left out, so configurations (and the frame cache's keys) written before
    // the key existed keep their text.
    if (std::string_view(k.name) == "accel" && accel == "none") continue;
    if (!out.empty()) out += ',';
    out += k.name;
    out += '=';
    out += k.print(*this);
  }
  return out;
}

EvalConfig tiny_defaults() {
  EvalConfig c;
  c.steps = tiny::kSteps;
  c.shift = tiny::kShift;
  c.guide = tiny::kGuideScale;
  c.precision = "fp32";
  c.width = c.height = tiny::kSize;
  c.frames = tiny::kFrames;
  return c;
}

EvalConfig wan21_defaults() { return EvalConfig{}; }

std::vector<std::string> config_keys() {
  std::vector<std::string> out;
  for (const Key& k : keys()) out.emplace_back(k.name);
  return out;
}

EvalConfig parse_config_spec(std::string_view spec, const EvalConfig& defaults,
                             const std::string& flag) {
  EvalConfig c = defaults;
  if (trim(spec).empty())
    throw_input_error(flag, ": empty configuration (expected 'default' or key=value,...)");
  std::set<std::string, std::less<>> seen;
  size_t pos = 0, item = 0;
  while (pos <= spec.size()) {
    const size_t begin = pos;
    const size_t comma = spec.find(',', pos);
    const std::string_view part = trim(
        spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    pos = comma == std::string_view::npos ? spec.size() + 1 : comma + 1;
    const bool first = item++ == 0;
    if (part == "default" && first) continue;
    const size_t eq = part.find('=');
    if (part.empty() || eq == std::string_view::npos) {
      std::string names;
      for (const Key& k : keys()) names += std::string(names.empty() ? "" : ", ") + k.name;
      throw_input_error(flag, ": expected key=value ('default' only first), got '", part,
                        "' (keys: ", names, ")");
    }
    const std::string_view name = trim(part.substr(0, eq));
    std::string_view value = trim(part.substr(eq + 1));
    if (name == "attention" || name == "accel") {
      // These specs run to the end, or to the other one: their options are separated by
      // commas too.
      const size_t start = spec.find('=', begin) + 1;
      size_t end = spec.size();
      for (const char* other : {",attention=", ",accel="}) {
        const size_t at = spec.find(other, start);
        if (at != std::string_view::npos) end = std::min(end, at);
      }
      value = trim(spec.substr(start, end - start));
      pos = end == spec.size() ? spec.size() + 1 : end + 1;
    }
    const Key* key = nullptr;
    for (const Key& k : keys())
      if (name == k.name) key = &k;
    if (!key) {
      std::string names;
      for (const Key& k : keys()) names += std::string(names.empty() ? "" : ", ") + k.name;
      throw_input_error(flag, ": unknown key '", name, "' (keys: ", names, ")");
    }
    if (!seen.insert(std::string(name)).second)
      throw_input_error(flag, ": key '", name, "' given twice");
    key->parse(c, value, flag + " " + key->name);
  }
  return c;
}

void apply_config(const EvalConfig& c, GenerateOptions& o) {
  o.width = c.width;
  o.height = c.height;
  o.frames = c.frames;
  o.denoise.steps = c.steps;
  o.denoise.shift = c.shift;
  o.denoise.guide_scale = c.guide;
  o.denoise.sampler = c.sampler;
  o.precision = wan::parse_precision(c.precision, "precision");
  o.vae_precision = o.precision;
  o.attention = c.attention;
  o.accel = c.accel;
}

}  // namespace vidax::eval
