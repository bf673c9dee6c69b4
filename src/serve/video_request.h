// What a video request becomes: the job's GenerateOptions (the server's settings and defaults
// with the request's fields, serve/request_fields.h), the request as the job records it, and
// plan errors attributed to request fields. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/text_to_video.h"
#include "serve/request_fields.h"

namespace vidax::serve {

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
