// VideoServer: routes, authentication, the job runner that calls generate().
#include "serve/video_server.h"

#include <httplib.h>
#include <omp.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "io/temp_paths.h"
#include "serve/job_queue.h"
#include "serve/video_request.h"
#include "sparse/attention_policy.h"

namespace vidax::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(2, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
}

bool is_content_route(const std::string& path) {
  return path.size() > 8 && path.compare(path.size() - 8, 8, "/content") == 0;
}

// Forgets the request's Range header (see the pre-routing handler). The Request object is the
// server's own, not const; the handlers only see it through a const reference.
void drop_ranges(const httplib::Request& req) {
  const_cast<httplib::Request&>(req)
      .ranges.clear();  // NOLINT(cppcoreguidelines-pro-type-const-cast)
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& field = "") {
  json error = {{"message", message}, {"status", status}};
  if (!field.empty()) error["field"] = field;
  send_json(res, status, {{"error", error}});
}

// Equal strings in time independent of where they differ (the bearer token).
bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// %XX escapes (what the page's encodeURIComponent writes into the cookie); a malformed escape is
// kept as it is.
std::string percent_decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// The host part of a Host header ("127.0.0.1:8080" -> "127.0.0.1", "[::1]:80" -> "::1").
std::string host_name(const std::string& header) {
  if (!header.empty() && header.front() == '[') {
    const size_t close = header.find(']');
    return close == std::string::npos ? header : header.substr(1, close - 1);
  }
  return header.substr(0, header.find(':'));
}

bool is_loopback_name(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string cookie_value(const std::string& cookies, const std::string& name) {
  size_t pos = 0;
  while (pos < cookies.size()) {
    size_t end = cookies.find(';', pos);
    if (end == std::string::npos) end = cookies.size();
    std::string part = cookies.substr(pos, end - pos);
    const size_t first = part.find_first_not_of(' ');
    part = first == std::string::npos ? "" : part.substr(first);
    if (part.rfind(name + "=", 0) == 0) return percent_decode(part.substr(name.size() + 1));
    pos = end + 1;
  }
  return "";
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

struct VideoServer::Impl {
  ServeOptions options;
  std::shared_ptr<ResidentModels> resident;
  std::unique_ptr<JobQueue> queue;
  httplib::Server http;
  // Open event streams: each holds an HTTP thread, so they are capped below the pool's size.
  static constexpr int kMaxEventStreams = 8;
  std::shared_ptr<std::atomic<int>> event_streams = std::make_shared<std::atomic<int>>(0);
  std::atomic<bool> stop_requested{false};

  explicit Impl(ServeOptions o) : options(std::move(o)) {
    if (options.keep_models) resident = std::make_shared<ResidentModels>();
    queue = std::make_unique<JobQueue>(
        options.output_dir, options.max_queue,
        [this](const Job& job, const std::function<bool()>& cancelled,
               const std::function<void(const ProgressEvent&)>& progress) {
          return run_job(job, cancelled, progress);
        });
    routes();
  }

  fs::path file_of(const std::string& name) const { return fs::path(options.output_dir) / name; }

  // The job's GenerateOptions from its recorded request (also after a restart).
  GenerateOptions options_for(const Job& job) const {
    json request = job.request;
    const std::string image = request.value("image", json()).is_string()
                                  ? request["image"].get<std::string>()
                                  : std::string();
    const std::string last = request.value("last_image", json()).is_string()
                                 ? request["last_image"].get<std::string>()
                                 : std::string();
    request.erase("image");
    request.erase("last_image");
    const VideoRequestFields fields = parse_video_request(request);
    return job_options(options.base, fields, request.at("seed").get<uint64_t>(),
                       image.empty() ? "" : file_of(image).string(),
                       last.empty() ? "" : file_of(last).string());
  }

  JobResult run_job(const Job& job, const std::function<bool()>& cancelled,
                    const std::function<void(const ProgressEvent&)>& on_progress) {
    if (options.base.ctx.threads > 0) omp_set_num_threads(options.base.ctx.threads);
    GenerateOptions o = options_for(job);
    o.output = file_of(job.id + ".mp4").string();
    o.resident = resident;
    o.cancelled = cancelled;
    o.command_line = options.command_line;
    o.command_line.push_back("(job " + job.id + ")");
    const GenerationPlan plan = plan_generation(o);
    Progress progress(nullptr, false);
    progress.set_listener(on_progress);
    const GenerationResult r = generate(o, plan, progress);
    return {r.seconds_per_step, job.id + ".mp4"};
  }

  void post_video(const httplib::Request& req, httplib::Response& res) {
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::parse_error& e) {
      send_error(res, 400, std::string("the body is not valid JSON: ") + e.what());
      return;
    }
    const std::string id = new_job_id();
    std::vector<fs::path> saved;  // images written for this request; removed if it is refused
    auto drop_saved = [&] {
      std::error_code ec;
      for (const fs::path& p : saved) fs::remove(p, ec);
    };
    try {
      const VideoRequestFields fields = parse_video_request(body);
      try {
        sparse::make_attention_policy(fields.attention.value_or(options.base.attention));
      } catch (const InputError& e) {
        const RequestError named = request_error_from_plan(e);
        throw RequestError("attention", named.what());
      }
      std::string image_file, last_file;
      for (const auto& [bytes, name, label] :
           {std::tuple{&fields.image, &image_file, "image"},
            std::tuple{&fields.last_image, &last_file, "last_image"}}) {
        if (bytes->empty()) continue;
        *name = id + "." + label + "." + image_extension(*bytes);
        saved.push_back(file_of(*name));
        write_whole_file(saved.back().string(),
                         {reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()}, true);
      }
      const uint64_t seed = fields.seed.value_or(
          ((static_cast<uint64_t>(std::random_device{}()) << 31) ^ std::random_device{}()));
      GenerateOptions o = job_options(options.base, fields, seed,
                                      image_file.empty() ? "" : file_of(image_file).string(),
                                      last_file.empty() ? "" : file_of(last_file).string());
      GenerationPlan plan;
      try {
        plan = plan_generation(o);
        if (resident)
          require_fits_resident(plan, *resident, plan.available_bytes);
        else
          require_fits(plan.memory, plan.available_bytes);
      } catch (const RequestError&) {
        throw;
      } catch (const InputError& e) {
        throw request_error_from_plan(e);
      }
      Job job;
      job.id = id;
      job.created = unix_now();
      job.request = canonical_request(fields, o, plan, seed, image_file, last_file);
      const Job accepted = queue->submit(job);
      res.set_header("Location", "/v1/videos/" + id);
      send_json(res, 202, accepted.to_json());
    } catch (const RequestError& e) {
      drop_saved();
      send_error(res, 400, e.what(), e.field());
    } catch (const QueueFull& e) {
      drop_saved();
      res.set_header("Retry-After", "10");
      send_error(res, 429, e.what());
    } catch (const InputError& e) {
      drop_saved();
      send_error(res, 400, e.what());
    }
  }

  void get_video(const std::string& id, httplib::Response& res) {
    const std::optional<Job> job = queue->get(id);
    if (!job) return send_error(res, 404, "no video job " + id);
    json j = job->to_json();
    if (job->state == JobState::kSucceeded) {
      try {
        j["sidecar"] = json::parse(read_text_file(file_of(job->video_file + ".json")));
      } catch (const std::exception&) {
        j["sidecar"] = nullptr;
      }
    }
    send_json(res, 200, j);
  }

  void get_content(const httplib::Request& req, const std::string& id, httplib::Response& res) {
    const std::optional<Job> job = queue->get(id);
    if (!job || job->state != JobState::kSucceeded) drop_ranges(req);
    if (!job) return send_error(res, 404, "no video job " + id);
    if (job->state != JobState::kSucceeded)
      return send_error(
          res, 409,
          std::string("video ") + id + " is " + job_state_name(job->state) + ", not succeeded");
    const fs::path path = file_of(job->video_file);
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) {
      drop_ranges(req);
      return send_error(res, 410, "the video file of " + id + " is gone");
    }
    // A range that starts past the end: 416 with the size, as RFC 9110 asks. One that runs past
    // it ends at the last byte. Several ranges (multipart) are answered with the whole file, which
    // RFC 9110 allows (cpp-httplib 0.11 gets multipart ranges of a streamed body wrong).
    for (const auto& [first, last] : req.ranges)
      if ((first >= 0 && static_cast<uintmax_t>(first) >= size) || (first < 0 && last <= 0) ||
          (first >= 0 && last >= 0 && last < first)) {
        res.set_header("Content-Range", str_cat("bytes */", size));
        drop_ranges(req);
        return send_error(res, 416, str_cat("range outside the video's ", size, " bytes"));
      }
    auto& ranges = const_cast<httplib::Request&>(req).ranges;  // NOLINT (see drop_ranges)
    if (ranges.size() > 1) ranges.clear();
    for (auto& [first, last] : ranges) {
      if (first >= 0 && (last < 0 || static_cast<uintmax_t>(last) >= size))
        last = static_cast<ssize_t>(size) - 1;
      if (first < 0 && static_cast<uintmax_t>(last) > size) last = static_cast<ssize_t>(size);
    }
    auto file = std::make_shared<std::ifstream>(path, std::ios::binary);
    res.set_header("Accept-Ranges", "bytes");
    res.set_header("Content-Disposition", "inline; filename=\"" + job->video_file + "\"");
    res.set_content_provider(static_cast<size_t>(size), "video/mp4",
                             [file](size_t offset, size_t length, httplib::DataSink& sink) {
                               char buffer[1 << 16];
                               file->seekg(static_cast<std::streamoff>(offset));
                               while (length > 0) {
                                 const size_t n = std::min(length, sizeof(buffer));
                                 file->read(buffer, static_cast<std::streamsize>(n));
                                 const auto got = static_cast<size_t>(file->gcount());
                                 if (got == 0 || !sink.write(buffer, got)) return false;
                                 length -= got;
                               }
                               return true;
                             });
  }

  void get_events(const httplib::Request& req, const std::string& id, httplib::Response& res) {
    if (!queue->get(id)) return send_error(res, 404, "no video job " + id);
    int64_t after = 0;
    if (req.has_header("Last-Event-ID")) {
      try {
        after = std::stoll(req.get_header_value("Last-Event-ID"));
      } catch (const std::exception&) {
        after = 0;
      }
      // A client reconnecting after the end: nothing more will come. 204 tells an EventSource
      // to stop reconnecting.
      const auto batch = queue->wait_events(id, after, 0);
      if (batch && batch->terminal && batch->events.empty()) {
        res.status = 204;
        return;
      }
    }
    if (event_streams->fetch_add(1) >= kMaxEventStreams) {
      event_streams->fetch_sub(1);
      res.set_header("Retry-After", "5");
      return send_error(res, 503,
                        str_cat("too many open event streams (", kMaxEventStreams,
                                "); poll GET /v1/videos/", id, " instead"));
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    JobQueue* q = queue.get();
    auto streams = event_streams;
    res.set_chunked_content_provider(
        "text/event-stream",
        [q, id, after](size_t, httplib::DataSink& sink) mutable {
          const auto batch = q->wait_events(id, after, 15.0);
          if (!batch) {
            sink.done();
            return true;
          }
          std::string text;
          if (batch->events.empty() && !batch->terminal) text = ": keep-alive\n\n";
          for (const JobEvent& ev : batch->events) {
            text += str_cat("id: ", ev.seq, "\nevent: ", ev.kind, "\ndata: ",
                            ev.data.dump(-1, ' ', false, json::error_handler_t::replace), "\n\n");
            after = ev.seq;
          }
          if (!text.empty() && !sink.write(text.data(), text.size())) return false;
          if (batch->terminal) sink.done();
          return true;
        },
        [streams](bool) { streams->fetch_sub(1); });  // however the stream ended
  }

  void delete_video(const std::string& id, httplib::Response& res) {
    switch (queue->cancel(id)) {
      case CancelOutcome::kNotFound:
        return send_error(res, 404, "no video job " + id);
      case CancelOutcome::kAlreadyFinished:
        return send_error(res, 409,
                          std::string("video ") + id + " is already " +
                              job_state_name(queue->get(id)->state) + "; nothing to cancel");
      case CancelOutcome::kCancelled:
      case CancelOutcome::kCancelling:
        break;
    }
    send_json(res, 202, queue->get(id)->to_json());
  }

  std::string metrics_text() const {
    const QueueMetrics m = queue->metrics();
    std::ostringstream out;
    auto metric = [&](const char* name, const char* type, const char* help) {
      out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    };
    metric("vidax_queue_length", "gauge", "Video jobs waiting to run.");
    out << "vidax_queue_length " << m.queued << "\n";
    metric("vidax_jobs_running", "gauge", "Video jobs running (0 or 1).");
    out << "vidax_jobs_running " << m.running << "\n";
    metric("vidax_jobs_total", "counter", "Video jobs finished since the server started.");
    out << "vidax_jobs_total{status=\"succeeded\"} " << m.succeeded << "\n"
        << "vidax_jobs_total{status=\"failed\"} " << m.failed << "\n"
        << "vidax_jobs_total{status=\"cancelled\"} " << m.cancelled << "\n";
    metric("vidax_denoise_steps_total", "counter", "Denoising steps run.");
    out << "vidax_denoise_steps_total " << m.steps << "\n";
    metric("vidax_denoise_step_seconds_total", "counter", "Seconds spent in denoising steps.");
    out << "vidax_denoise_step_seconds_total " << m.step_seconds << "\n";
    metric("vidax_seconds_per_step", "gauge", "Seconds of the last denoising step.");
    out << "vidax_seconds_per_step " << m.last_seconds_per_step << "\n";
    return out.str();
  }

  bool authorized(const httplib::Request& req) const {
    if (options.token.empty()) return true;
    const std::string header = req.get_header_value("Authorization");
    if (header.rfind("Bearer ", 0) == 0 && same_secret(header.substr(7), options.token))
      return true;
    const std::string cookie = cookie_value(req.get_header_value("Cookie"), "vidax_token");
    return !cookie.empty() && same_secret(cookie, options.token);
  }

  void routes() {
    http.set_payload_max_length(options.max_body_bytes);
    http.set_read_timeout(options.io_timeout_seconds, 0);
    http.set_write_timeout(options.io_timeout_seconds, 0);
    http.set_keep_alive_timeout(5);
    http.new_task_queue = [] { return new httplib::ThreadPool(16); };  // SSE streams hold one each
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // cpp-httplib 0.11 cuts every routed response to the request's Range, error bodies too:
      // only the content route serves ranges (and drops them itself before an error).
      if (!is_content_route(req.path)) drop_ranges(req);
      // Bound to loopback: a page elsewhere must not reach the API through a DNS name that
      // resolves to 127.0.0.1 (DNS rebinding).
      if (is_loopback_name(options.host) &&
          !is_loopback_name(host_name(req.get_header_value("Host")))) {
        send_error(
            res, 403,
            "Host '" + req.get_header_value("Host") + "' is not this loopback server's name");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (req.method == "POST") {
        // The body limit holds only for a declared length: chunked or unsized bodies are refused
        // before they are read.
        if (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length")) {
          res.set_header("Connection", "close");
          send_error(res, 411, "a POST body needs a Content-Length (no chunked bodies)");
          return httplib::Server::HandlerResponse::Handled;
        }
        // JSON only: a form or text/plain POST from another site's page is not a request.
        const std::string type = req.get_header_value("Content-Type");
        if (type.rfind("application/json", 0) != 0) {
          res.set_header("Connection", "close");
          send_error(res, 415, "Content-Type must be application/json, got '" + type + "'");
          return httplib::Server::HandlerResponse::Handled;
        }
      }
      if (req.path == "/" || req.path == "/healthz" || authorized(req))
        return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, 401, "missing or wrong bearer token");
      return httplib::Server::HandlerResponse::Handled;
    });
    const size_t max_body = options.max_body_bytes;
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [max_body](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          std::string message = str_cat("HTTP ", res.status);
          if (res.status == 404) message = "no route " + req.method + " " + req.path;
          if (res.status == 413)
            message = str_cat("the request body is larger than the server accepts (", max_body,
                              " bytes)");
          if (res.status == 416) message = "the requested range is outside the file";
          if (res.status == 400) message = "malformed HTTP request";
          send_error(res, res.status, message);
          return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, const std::exception_ptr& ep) {
          std::string what = "unknown exception";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          send_error(res, 500, "internal error: " + what);
        });
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(kIndexHtml, "text/html; charset=utf-8");
    });
    http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"status", "ok"}});
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    http.Post("/v1/videos", [this](const httplib::Request& req, httplib::Response& res) {
      post_video(req, res);
    });
    http.Get("/v1/videos", [this](const httplib::Request&, httplib::Response& res) {
      json all = json::array();
      for (const Job& j : queue->list()) all.push_back(j.to_json());
      send_json(res, 200, {{"videos", all}});
    });
    // Ids are exactly 16 hex digits: nothing else reaches the file system.
    const std::string id = "/v1/videos/([0-9a-f]{16})";
    http.Get(id, [this](const httplib::Request& req, httplib::Response& res) {
      get_video(req.matches[1], res);
    });
    http.Get(id + "/content", [this](const httplib::Request& req, httplib::Response& res) {
      get_content(req, req.matches[1], res);
    });
    http.Get(id + "/events", [this](const httplib::Request& req, httplib::Response& res) {
      get_events(req, req.matches[1], res);
    });
    http.Delete(id, [this](const httplib::Request& req, httplib::Response& res) {
      delete_video(req.matches[1], res);
    });
    auto bad_id = [](const httplib::Request& req, httplib::Response& res) {
      send_error(
          res, 404,
          "no video job '" + std::string(req.matches[1]) + "' (ids are 16 lowercase hex digits)");
    };
    http.Get("/v1/videos/([^/]+)(/content|/events)?", bad_id);
    http.Delete("/v1/videos/([^/]+)", bad_id);
  }
};

VideoServer::VideoServer(ServeOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

VideoServer::~VideoServer() {
  stop();
  impl_->queue->shutdown();
}

int VideoServer::bind() {
  const ServeOptions& o = impl_->options;
  int port = o.port;
  if (o.port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) throw_input_error("--host ", o.host, ": cannot bind a port");
  } else if (!impl_->http.bind_to_port(o.host, o.port)) {
    throw_input_error("--host ", o.host, " --port ", o.port,
                      ": cannot bind (in use, or not an address of this machine)");
  }
  return port;
}

void VideoServer::run() {
  if (!impl_->stop_requested) impl_->http.listen_after_bind();
  impl_->queue->shutdown();
}

bool VideoServer::stop() {
  impl_->stop_requested = true;
  impl_->queue->request_stop();  // the running job stops at its next step, event streams end
  impl_->http.stop();
  return impl_->http.is_running();
}

}  // namespace vidax::serve
