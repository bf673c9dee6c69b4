// The body of `POST /v1/videos`: JSON fields checked one by one (type, range, unknown names),
// a bad field raising RequestError naming it. Images for image-to-video come as base64
// (optionally a `data:image/...;base64,` URL). Depends on core and nlohmann-json only (the fuzz
// target fuzz/serve_request_fuzz.cpp links it alone). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vidax::serve {

// An invalid request: HTTP 400 with `field` named ("" when it is about the whole body).
class RequestError : public InputError {
 public:
  RequestError(std::string field, const std::string& message)
      : InputError(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

struct VideoRequestFields {
  std::string prompt;
  std::optional<std::string> negative_prompt;
  std::optional<int64_t> width, height, num_frames, steps;
  std::optional<uint64_t> seed;  // absent: drawn at random when accepted
  std::optional<double> guide_scale, shift;
  std::optional<std::string> sampler, attention, accel;
  std::string image, last_image;  // decoded bytes (PNG, JPEG or WebP); empty: none
};

// Throws RequestError for a body that is not an object, an unknown field, a value of the wrong
// type or out of range, an empty prompt, bad base64, or an image that is not PNG, JPEG or WebP.
VideoRequestFields parse_video_request(const nlohmann::json& body);

// "png", "jpg" or "webp" from the first bytes; empty when none.
std::string image_extension(const std::string& bytes);

// Standard base64 (RFC 4648, padding optional, no whitespace inside); nullopt when malformed.
std::optional<std::string> decode_base64(const std::string& text);

}  // namespace vidax::serve
