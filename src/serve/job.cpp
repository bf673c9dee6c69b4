// Job: state names, the API view and the on-disk record.
#include "serve/job.h"

#include <chrono>
#include <random>

#include "core/error.h"

namespace vidax::serve {

using nlohmann::json;

const char* job_state_name(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "failed";
}

JobState parse_job_state(const std::string& name) {
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled})
    if (name == job_state_name(s)) return s;
  throw_input_error("job state '", name, "': expected queued, running, succeeded, failed or ",
                    "cancelled");
}

json Job::to_json() const {
  json j = {{"id", id},
            {"status", job_state_name(state)},
            {"request", request},
            {"created", created},
            {"started", started > 0 ? json(started) : json()},
            {"finished", finished > 0 ? json(finished) : json()},
            {"error", error.empty() ? json() : json(error)}};
  j["progress"] = {{"phase", progress.phase},
                   {"unit", progress.unit},
                   {"done", progress.done},
                   {"total", progress.total},
                   {"seconds_per_unit", progress.seconds_per_unit},
                   {"eta_seconds", progress.eta_seconds}};
  j["timings"] = {{"queued_seconds", started > 0 ? json(started - created) : json()},
                  {"run_seconds", finished > 0 && started > 0 ? json(finished - started) : json()},
                  {"seconds_per_step", seconds_per_step > 0 ? json(seconds_per_step) : json()}};
  j["content"] = video_file.empty() ? json() : json("/v1/videos/" + id + "/content");
  return j;
}

json Job::to_record() const {
  return {{"format", "vidax-serve-job-1"},
          {"id", id},
          {"status", job_state_name(state)},
          {"request", request},
          {"error", error},
          {"created", created},
          {"started", started},
          {"finished", finished},
          {"seconds_per_step", seconds_per_step},
          {"video_file", video_file}};
}

Job Job::from_record(const json& r) {
  auto field = [&](const char* name, json::value_t type) -> const json& {
    if (!r.is_object() || !r.contains(name))
      throw_input_error("job record: field '", name, "' is missing");
    const json& v = r.at(name);
    const bool ok = type == json::value_t::number_float ? v.is_number() : v.type() == type;
    if (!ok) throw_input_error("job record: field '", name, "' has the wrong type");
    return v;
  };
  if (field("format", json::value_t::string).get<std::string>() != "vidax-serve-job-1")
    throw_input_error("job record: format '", r.at("format").get<std::string>(),
                      "', expected vidax-serve-job-1");
  Job j;
  j.id = field("id", json::value_t::string).get<std::string>();
  if (!valid_job_id(j.id)) throw_input_error("job record: id '", j.id, "' is not a job id");
  j.state = parse_job_state(field("status", json::value_t::string).get<std::string>());
  j.request = field("request", json::value_t::object);
  j.error = field("error", json::value_t::string).get<std::string>();
  j.created = field("created", json::value_t::number_float).get<double>();
  j.started = field("started", json::value_t::number_float).get<double>();
  j.finished = field("finished", json::value_t::number_float).get<double>();
  j.seconds_per_step = field("seconds_per_step", json::value_t::number_float).get<double>();
  j.video_file = field("video_file", json::value_t::string).get<std::string>();
  if (!j.video_file.empty() && j.video_file != j.id + ".mp4")
    throw_input_error("job record ", j.id, ": video_file '", j.video_file, "', expected ", j.id,
                      ".mp4");
  return j;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string new_job_id() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  static const char* digits = "0123456789abcdef";
  std::string id(16, '0');
  for (int i = 0; i < 16; ++i) id[static_cast<size_t>(i)] = digits[(v >> (60 - 4 * i)) & 15];
  return id;
}

bool valid_job_id(const std::string& id) {
  if (id.size() != 16) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace vidax::serve
