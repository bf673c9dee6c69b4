// The body of `POST /v1/videos`: JSON fields checked one by one (type, range, unknown names),
// with the same defaults and rules as `vidax generate`; a bad field raises RequestError naming
// it. Images for image-to-video come as base64 (optionally a `data:image/...;base64,` URL).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "pipeline/text_to_video.h"

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

// The options of one job: `base` (the server's models and settings, and its defaults for the
// fields a request leaves out) with the request's fields; images are given by the paths where
// the caller saved them.
GenerateOptions job_options(const GenerateOptions& base, const VideoRequestFields& fields,
                            uint64_t seed, const std::string& image_path,
                            const std::string& last_image_path);

// The request as the job records it: every field with its resolved value (the plan's size,
// frames, steps, guide scale, the seed used), images by file name.
nlohmann::json canonical_request(const VideoRequestFields& fields, const GenerateOptions& options,
                                 const GenerationPlan& plan, uint64_t seed,
                                 const std::string& image_file, const std::string& last_image_file);

// A plan_generation error attributed to a request field: "--frames 10: ..." -> field
// "num_frames", message "num_frames 10: ...". Other messages keep field "".
RequestError request_error_from_plan(const InputError& error);

}  // namespace vidax::serve
