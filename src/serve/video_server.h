// `vidax serve`: the HTTP API over a JobQueue (serve/job_queue.h) and the generation pipeline.
//
//   POST   /v1/videos                {prompt, negative_prompt, size, num_frames, steps, seed,
//                                    sampler, guide_scale, shift, attention, accel, image,
//                                    last_image} -> 202 {"id", ...}; 400 naming the field,
//                                    429 when the queue is full, 413 over the body limit
//   GET    /v1/videos                every job, newest first
//   GET    /v1/videos/{id}           status, progress, timings, the sidecar once succeeded
//   GET    /v1/videos/{id}/content   the MP4 (HTTP range requests: browsers seek)
//   GET    /v1/videos/{id}/events    server-sent events: status and progress
//   DELETE /v1/videos/{id}           cancel a queued or running job (409 once finished)
//   GET    /healthz, /metrics (Prometheus text), / (the web page)
//
// Requests take generate's defaults and checks (the plan is made, from checkpoint headers only,
// before a job is accepted). The models stay loaded between jobs (pipeline/resident_models.h)
// unless keep_models is off. With a token every route but / and /healthz needs
// `Authorization: Bearer TOKEN` (or the page's `vidax_token` cookie). Docs: docs/serve.md.
//
// Thread safety: start() once, then stop() from any thread (e.g. a signal thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/text_to_video.h"

namespace vidax::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (start() returns it)
  std::string output_dir = "vidax-videos";
  size_t max_queue = 16;
  std::string token;                      // empty: no authentication
  size_t max_body_bytes = 32u << 20;      // a request body, images included
  int io_timeout_seconds = 30;            // reading a request / writing a response
  GenerateOptions base;                   // the models and settings every job uses
  bool keep_models = true;                // keep the models loaded between jobs
  std::vector<std::string> command_line;  // recorded in each sidecar
};

class VideoServer {
 public:
  // Opens the output folder and its job list (restarting queued jobs). Throws InputError.
  explicit VideoServer(ServeOptions options);
  ~VideoServer();
  VideoServer(const VideoServer&) = delete;
  VideoServer& operator=(const VideoServer&) = delete;

  // Binds the socket; returns the port. Throws InputError when it cannot bind.
  int bind();
  // Serves until stop(); then stops the queue (a running job is queued again for next time).
  void run();
  // Asks run() to return (from any thread). Returns whether the listener was still running after
  // the request: a stop that comes while run() is starting may need repeating.
  bool stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The page served at `/` (serve/web/index.html, compiled in).
extern const char* const kIndexHtml;

}  // namespace vidax::serve
