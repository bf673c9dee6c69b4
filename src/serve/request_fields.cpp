// POST /v1/videos bodies: field checks and base64 images.
#include "serve/request_fields.h"

#include <array>
#include <cmath>
#include <limits>

namespace vidax::serve {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& field, const std::string& message) {
  throw RequestError(field, field + ": " + message);
}

int64_t integer_field(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() &&
      !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
    fail(field, "expected an integer, got " + v.dump());
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)))
      fail(field, str_cat("expected ", lo, "..", hi, ", got ", v.dump()));
    return static_cast<int64_t>(d);
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(field, str_cat("expected ", lo, "..", hi, ", got ", v.dump()));
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) fail(field, str_cat("expected ", lo, "..", hi, ", got ", n));
  return n;
}

double number_field(const json& v, const std::string& field) {
  if (!v.is_number()) fail(field, "expected a number, got " + v.dump());
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(field, "expected a finite number");
  return d;
}

std::string string_field(const json& v, const std::string& field) {
  if (!v.is_string()) fail(field, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

std::string image_field(const json& v, const std::string& field) {
  std::string text = string_field(v, field);
  if (text.rfind("data:", 0) == 0) {  // data:image/png;base64,....
    const size_t comma = text.find(',');
    if (comma == std::string::npos || text.substr(0, comma).find(";base64") == std::string::npos)
      fail(field, "a data URL must be base64 (data:image/png;base64,...)");
    text.erase(0, comma + 1);
  }
  const std::optional<std::string> bytes = decode_base64(text);
  if (!bytes) fail(field, "not valid base64");
  if (image_extension(*bytes).empty()) fail(field, "not a PNG, JPEG or WebP image");
  return *bytes;
}

// "832x480" -> (832, 480).
std::pair<int64_t, int64_t> size_field(const json& v) {
  const std::string s = string_field(v, "size");
  const size_t x = s.find('x');
  auto number = [&](const std::string& part) -> int64_t {
    if (part.empty() || part.size() > 6 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      fail("size", "expected WIDTHxHEIGHT (e.g. \"832x480\"), got \"" + s + "\"");
    return std::stoll(part);
  };
  if (x == std::string::npos)
    fail("size", "expected WIDTHxHEIGHT (e.g. \"832x480\"), got \"" + s + "\"");
  const int64_t w = number(s.substr(0, x)), h = number(s.substr(x + 1));
  if (w < 1 || h < 1) fail("size", "width and height must be positive, got \"" + s + "\"");
  return {w, h};
}

}  // namespace

std::optional<std::string> decode_base64(const std::string& text) {
  std::array<int, 256> value{};
  value.fill(-1);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i)
    value[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);
  size_t end = text.size();
  size_t padding = 0;
  while (end > 0 && text[end - 1] == '=' && padding < 2) {
    --end;
    ++padding;
  }
  if (padding > 0 && (end + padding) % 4 != 0) return std::nullopt;
  if (end % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(end * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < end; ++i) {
    const int v = value[static_cast<unsigned char>(text[i])];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;  // non-canonical tail
  return out;
}

std::string image_extension(const std::string& b) {
  if (b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) return "png";
  if (b.size() >= 3 && b.compare(0, 3, "\xff\xd8\xff") == 0) return "jpg";
  if (b.size() >= 12 && b.compare(0, 4, "RIFF") == 0 && b.compare(8, 4, "WEBP") == 0) return "webp";
  return "";
}

VideoRequestFields parse_video_request(const json& body) {
  if (!body.is_object()) throw RequestError("", "the body must be a JSON object");
  VideoRequestFields f;
  for (const auto& [key, v] : body.items()) {
    if (v.is_null()) continue;  // null: the default
    if (key == "prompt") {
      f.prompt = string_field(v, key);
    } else if (key == "negative_prompt") {
      f.negative_prompt = string_field(v, key);
    } else if (key == "size") {
      const auto [w, h] = size_field(v);
      f.width = w;
      f.height = h;
    } else if (key == "num_frames") {
      f.num_frames = integer_field(v, key, 1, 100000);
    } else if (key == "steps") {
      f.steps = integer_field(v, key, 1, 1000);
    } else if (key == "seed") {
      f.seed = static_cast<uint64_t>(integer_field(v, key, 0, std::numeric_limits<int64_t>::max()));
    } else if (key == "sampler") {
      f.sampler = string_field(v, key);
      if (f.sampler != "unipc" && f.sampler != "dpm++" && f.sampler != "euler")
        fail(key, "expected \"unipc\", \"dpm++\" or \"euler\", got \"" + *f.sampler + "\"");
    } else if (key == "guide_scale") {
      f.guide_scale = number_field(v, key);
      if (*f.guide_scale < 0) fail(key, "expected a number >= 0");
    } else if (key == "shift") {
      f.shift = number_field(v, key);
      if (!(*f.shift > 0)) fail(key, "expected a positive number");
    } else if (key == "attention") {
      f.attention = string_field(v, key);
    } else if (key == "accel") {
      f.accel = string_field(v, key);
    } else if (key == "image") {
      f.image = image_field(v, key);
    } else if (key == "last_image") {
      f.last_image = image_field(v, key);
    } else {
      throw RequestError(key, "unknown field '" + key +
                                  "' (expected prompt, negative_prompt, size, num_frames, steps, "
                                  "seed, sampler, guide_scale, shift, attention, accel, image, "
                                  "last_image)");
    }
  }
  if (f.prompt.find_first_not_of(" \t\r\n") == std::string::npos)
    fail("prompt", body.contains("prompt") ? "the prompt is empty" : "required");
  if (!f.last_image.empty() && f.image.empty())
    fail("last_image", "give the first frame as image too");
  return f;
}

}  // namespace vidax::serve
