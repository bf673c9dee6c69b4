// The job's GenerateOptions and recorded request; plan errors attributed to request fields.
#include "serve/video_request.h"

#include <array>
#include <cctype>
#include <utility>

namespace vidax::serve {

using nlohmann::json;

GenerateOptions job_options(const GenerateOptions& base, const VideoRequestFields& f, uint64_t seed,
                            const std::string& image_path, const std::string& last_image_path) {
  GenerateOptions o = base;
  o.prompt = f.prompt;
  if (f.negative_prompt) o.negative_prompt = f.negative_prompt;
  if (f.width) o.width = f.width;
  if (f.height) o.height = f.height;
  if (f.num_frames) o.frames = f.num_frames;
  if (f.sampler) o.denoise.sampler = *f.sampler;
  if (f.steps) o.denoise.steps = static_cast<int>(*f.steps);
  if (f.shift) o.denoise.shift = *f.shift;
  if (f.guide_scale) o.denoise.guide_scale = *f.guide_scale;
  o.denoise_given.steps = base.denoise_given.steps || f.steps.has_value();
  o.denoise_given.shift = base.denoise_given.shift || f.shift.has_value();
  o.denoise_given.guide_scale = base.denoise_given.guide_scale || f.guide_scale.has_value();
  o.seed = seed;
  if (f.attention) o.attention = *f.attention;
  if (f.accel) o.accel = *f.accel;
  o.image = image_path;
  o.last_image = last_image_path;
  return o;
}

json canonical_request(const VideoRequestFields& f, const GenerateOptions& o,
                       const GenerationPlan& plan, uint64_t seed, const std::string& image_file,
                       const std::string& last_image_file) {
  return {{"prompt", f.prompt},
          {"negative_prompt", o.negative_prompt ? json(*o.negative_prompt) : json()},
          {"size", str_cat(plan.video.width, "x", plan.video.height)},
          {"num_frames", plan.video.frames},
          {"steps", plan.denoise.steps},
          {"seed", seed},
          {"sampler", plan.denoise.sampler},
          {"guide_scale", plan.denoise.guide_scale},
          {"shift", plan.denoise.shift},
          {"attention", o.attention},
          {"accel", plan.accel_spec},
          {"image", image_file.empty() ? json() : json(image_file)},
          {"last_image", last_image_file.empty() ? json() : json(last_image_file)}};
}

RequestError request_error_from_plan(const InputError& error) {
  static const std::array<std::pair<const char*, const char*>, 12> kFlags{{
      {"--size", "size"},
      {"--frames", "num_frames"},
      {"--steps", "steps"},
      {"--sampler", "sampler"},
      {"--guide-scale", "guide_scale"},
      {"--shift", "shift"},
      {"--seed", "seed"},
      {"--attention", "attention"},
      {"--accel", "accel"},
      {"--last-image", "last_image"},
      {"--image", "image"},
      {"--negative-prompt", "negative_prompt"},
  }};
  const std::string message = error.what();
  // A flag at `at` that is not the start of a longer one ("--image" in "--image-size").
  auto standalone = [&](size_t at, size_t n) {
    const char next = at + n < message.size() ? message[at + n] : ' ';
    return next != '-' && std::isalnum(static_cast<unsigned char>(next)) == 0;
  };
  // The field: the flag that comes first in the message.
  size_t first = std::string::npos;
  const char* field = nullptr;
  for (const auto& [flag, name] : kFlags) {
    const size_t n = std::char_traits<char>::length(flag);
    for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + n))
      if (standalone(at, n)) {
        if (at < first) {
          first = at;
          field = name;
        }
        break;
      }
  }
  if (field == nullptr) return RequestError("", message);
  // Every flag in the message is written as its field.
  std::string renamed;
  for (size_t i = 0; i < message.size();) {
    bool replaced = false;
    for (const auto& [flag, name] : kFlags) {
      const size_t n = std::char_traits<char>::length(flag);
      if (message.compare(i, n, flag) == 0 && standalone(i, n)) {
        renamed += name;
        i += n;
        replaced = true;
        break;
      }
    }
    if (!replaced) renamed += message[i++];
  }
  return RequestError(field, renamed);
}

}  // namespace vidax::serve
