// One video job of `vidax serve`: its state machine, what the API shows of it, and how it is kept
// on disk. A job is queued, then running, then exactly one of succeeded, failed or cancelled
// (terminal; it never changes again). Its record lives in the output folder as `<id>.job.json`
// beside the video `<id>.mp4` and its sidecar `<id>.mp4.json`, written atomically on every
// state change, so the job list survives a restart (serve/job_queue.h rebuilds it).
// Plain data; not thread-safe on its own (the queue guards it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace vidax::serve {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };

const char* job_state_name(JobState state);
// Throws InputError for a name that is not a state.
JobState parse_job_state(const std::string& name);
inline bool is_terminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

struct JobProgress {
  std::string phase;  // "encode text", "denoise", "decode", ... (empty before the first)
  std::string unit;   // "step", "latent frame", ...
  int done = 0, total = 0;
  double seconds_per_unit = 0, eta_seconds = 0;
};

struct Job {
  std::string id;
  JobState state = JobState::kQueued;
  // The request as accepted (serve/video_request.h): validated fields with their defaults
  // resolved, images replaced by the names of the files saved beside the job.
  nlohmann::json request;
  std::string error;                              // failed / cancelled: why
  double created = 0, started = 0, finished = 0;  // Unix seconds (0: not yet)
  JobProgress progress;
  double seconds_per_step = 0;  // succeeded
  std::string video_file;       // succeeded: "<id>.mp4" (relative to the output folder)

  // What `GET /v1/videos/{id}` returns (without the sidecar).
  nlohmann::json to_json() const;
  // The record on disk; from_record throws InputError naming the field when it is malformed.
  nlohmann::json to_record() const;
  static Job from_record(const nlohmann::json& record);
};

// Seconds since the Unix epoch (the system clock): the jobs' created/started/finished times.
double unix_now();

// 16 lowercase hex digits from the system's random source.
std::string new_job_id();
// True for exactly what new_job_id() makes: no '/', '.', or anything a path could use.
bool valid_job_id(const std::string& id);

}  // namespace vidax::serve
