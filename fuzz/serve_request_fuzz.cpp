// libFuzzer target: the body of `POST /v1/videos` (serve/request_fields.h) and the job records
// `vidax serve` reads back from its output folder (serve/job.h). Any input must give a request,
// a record, or an InputError / JSON error; never a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "serve/job.h"
#include "serve/request_fields.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Base64 on the raw bytes as well as inside JSON strings.
  const auto bytes = vidax::serve::decode_base64(text);
  if (bytes) (void)vidax::serve::image_extension(*bytes);
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  if (body.is_discarded()) return 0;
  try {
    const vidax::serve::VideoRequestFields f = vidax::serve::parse_video_request(body);
    if (f.prompt.empty()) __builtin_trap();  // parse_video_request refuses empty prompts
  } catch (const vidax::InputError&) {
  }
  try {
    const vidax::serve::Job job = vidax::serve::Job::from_record(body);
    if (!vidax::serve::valid_job_id(job.id)) __builtin_trap();
    (void)job.to_json();
  } catch (const vidax::InputError&) {
  }
  return 0;
}
