// JobQueue: the worker thread, the on-disk records, cancellation and event streams.
#include "serve/job_queue.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/thread_scratch.h"
#include "io/temp_paths.h"

namespace vidax::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxEventsPerJob =
    20000;  // a bound on a job's stream (steps x phases is far less)

// "<16 hex>.<anything>.tmp.<pid>" of a process that is gone: a temporary of one of our jobs left
// by a killed server.
bool is_stale_job_temporary(const std::string& name) {
  if (name.size() < 17 || !valid_job_id(name.substr(0, 16)) || name[16] != '.') return false;
  const size_t tmp = name.rfind(".tmp.");
  if (tmp == std::string::npos) return false;
  const std::string pid = name.substr(tmp + 5);
  if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos)
    return false;
  return ::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH;
}

int64_t boot_sequence_base() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

JobQueue::JobQueue(std::string output_dir, size_t max_queued, JobRunner runner)
    : output_dir_(std::move(output_dir)), max_queued_(max_queued), runner_(std::move(runner)) {
  std::error_code ec;
  fs::create_directories(output_dir_, ec);
  if (ec || !fs::is_directory(output_dir_))
    throw_input_error("--output-dir ", output_dir_, ": cannot create the folder (",
                      ec ? ec.message() : "not a folder", ")");
  // One server per folder: a second would take the first one's jobs and temporaries.
  const std::string lock_path = (fs::path(output_dir_) / ".vidax-serve.lock").string();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    throw_input_error("--output-dir ", output_dir_, ": cannot open ", lock_path, " (",
                      std::strerror(errno), ")");
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw_input_error("--output-dir ", output_dir_,
                      ": another vidax serve is using this folder (it holds ", lock_path, ")");
  }
  next_seq_ = boot_sequence_base();
  restore();
  worker_ = std::thread([this] { worker(); });
}

JobQueue::~JobQueue() {
  shutdown();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void JobQueue::save(const Job& job) const {
  const std::string path = (fs::path(output_dir_) / (job.id + ".job.json")).string();
  const std::string temp = temp_path_for(path);
  const std::string text = job.to_record().dump(2, ' ', false, json::error_handler_t::replace);
  write_whole_file(temp, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}, false);
  rename_into_place(temp, path);
}

void JobQueue::restore() {
  std::vector<Job> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(output_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_stale_job_temporary(name)) {
      fs::remove_all(entry.path(), ec);
      continue;
    }
    if (name.size() != 16 + 9 || name.compare(16, 9, ".job.json") != 0) continue;
    try {
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      Job job = Job::from_record(json::parse(text.str()));
      if (job.id != name.substr(0, 16))
        throw_input_error("job record: id ", job.id, " in a file named ", name);
      found.push_back(std::move(job));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vidax serve: skipping %s: %s\n", entry.path().c_str(), e.what());
    }
  }
  if (ec)
    throw_input_error("--output-dir ", output_dir_, ": cannot list the folder (", ec.message(),
                      ")");
  std::sort(found.begin(), found.end(),
            [](const Job& a, const Job& b) { return a.created < b.created; });
  for (Job& job : found) {
    if (job.state == JobState::kRunning) {
      job.state = JobState::kFailed;
      job.error = "the server stopped while this job was running";
      job.finished = unix_now();
      save(job);
    } else if (job.state == JobState::kSucceeded &&
               !fs::exists(fs::path(output_dir_) / job.video_file)) {
      job.state = JobState::kFailed;
      job.error = "the video file " + job.video_file + " is gone from the output folder";
      save(job);
    }
    if (job.state == JobState::kQueued) queue_.push_back(job.id);
    Entry& e = jobs_[job.id];
    e.job = std::move(job);
    push_event(e, "status", {{"status", job_state_name(e.job.state)}});
  }
}

Job JobQueue::submit(Job job) {
  std::lock_guard lock(mutex_);
  if (stopping_) throw QueueFull("the server is shutting down");
  if (queue_.size() >= max_queued_)
    throw QueueFull(str_cat("the queue is full (", max_queued_, " jobs waiting)"));
  VIDAX_CHECK(valid_job_id(job.id) && jobs_.count(job.id) == 0, "submit: bad or reused id ",
              job.id);
  job.state = JobState::kQueued;
  save(job);
  const std::string id = job.id;
  Entry& e = jobs_[id];
  e.job = std::move(job);
  push_event(e, "status", {{"status", "queued"}});
  queue_.push_back(id);
  work_cv_.notify_one();
  return e.job;
}

std::optional<Job> JobQueue::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.job;
}

std::vector<Job> JobQueue::list() const {
  std::lock_guard lock(mutex_);
  std::vector<Job> out;
  out.reserve(jobs_.size());
  for (const auto& [id, e] : jobs_) out.push_back(e.job);
  std::sort(out.begin(), out.end(), [](const Job& a, const Job& b) {
    return a.created != b.created ? a.created > b.created : a.id > b.id;
  });
  return out;
}

CancelOutcome JobQueue::cancel(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return CancelOutcome::kNotFound;
  Entry& e = it->second;
  if (is_terminal(e.job.state)) return CancelOutcome::kAlreadyFinished;
  if (e.job.state == JobState::kQueued) {
    queue_.erase(std::remove(queue_.begin(), queue_.end(), id), queue_.end());
    finish(e, JobState::kCancelled, "cancelled while queued");
    return CancelOutcome::kCancelled;
  }
  user_cancelled_ = true;  // (a shutdown meanwhile must not queue it again)
  cancel_running_ = true;  // the runner stops at its next step
  return CancelOutcome::kCancelling;
}

QueueMetrics JobQueue::metrics() const {
  std::lock_guard lock(mutex_);
  QueueMetrics m = totals_;
  m.queued = static_cast<int64_t>(queue_.size());
  m.running = running_.empty() ? 0 : 1;
  return m;
}

std::optional<JobQueue::EventBatch> JobQueue::wait_events(const std::string& id, int64_t after_seq,
                                                          double timeout_s) const {
  std::unique_lock lock(mutex_);
  auto has_news = [&] {
    const auto it = jobs_.find(id);
    return it == jobs_.end() || stopping_ ||
           (!it->second.events.empty() && it->second.events.back().seq > after_seq) ||
           is_terminal(it->second.job.state);
  };
  event_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), has_news);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  EventBatch batch;
  for (const JobEvent& ev : it->second.events)
    if (ev.seq > after_seq) batch.events.push_back(ev);
  batch.terminal = is_terminal(it->second.job.state) || stopping_;
  return batch;
}

void JobQueue::push_event(Entry& e, std::string kind, json data) {
  const int64_t seq = ++next_seq_;
  if (e.events.size() >= kMaxEventsPerJob) e.events.erase(e.events.begin());
  e.events.push_back({seq, std::move(kind), std::move(data)});
  event_cv_.notify_all();
}

void JobQueue::finish(Entry& e, JobState state, const std::string& error) {
  e.job.state = state;
  e.job.error = error;
  e.job.finished = unix_now();
  try {
    save(e.job);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "vidax serve: job %s: %s\n", e.job.id.c_str(), ex.what());
  }
  if (state == JobState::kSucceeded) ++totals_.succeeded;
  if (state == JobState::kFailed) ++totals_.failed;
  if (state == JobState::kCancelled) ++totals_.cancelled;
  json data = {{"status", job_state_name(state)}};
  if (!error.empty()) data["error"] = error;
  push_event(e, "status", std::move(data));
  ended_.push_back(e.job.id);
  while (ended_.size() > kFullEventLogs) {
    std::vector<JobEvent>& old = jobs_.at(ended_.front()).events;
    if (old.size() > 1) {
      old.erase(old.begin(), old.end() - 1);  // the terminal status event stays
      old.shrink_to_fit();
    }
    ended_.pop_front();
  }
}

void JobQueue::request_stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cancel_running_ = true;
  }
  work_cv_.notify_all();
  event_cv_.notify_all();
}

void JobQueue::shutdown() {
  request_stop();
  if (worker_.joinable()) worker_.join();
}

void JobQueue::worker() {
  for (;;) {
    std::string id;
    Job job;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      id = queue_.front();
      queue_.pop_front();
      Entry& e = jobs_.at(id);
      e.job.state = JobState::kRunning;
      e.job.started = unix_now();
      try {
        save(e.job);
      } catch (const std::exception& ex) {
        finish(e, JobState::kFailed, ex.what());
        continue;
      }
      running_ = id;
      cancel_running_ = false;
      user_cancelled_ = false;
      push_event(e, "status", {{"status", "running"}});
      job = e.job;
    }
    auto cancelled = [this] { return cancel_running_.load(); };
    auto progress = [this, &id](const ProgressEvent& p) {
      std::lock_guard lock(mutex_);
      Entry& e = jobs_.at(id);
      JobProgress& jp = e.job.progress;
      jp.phase = p.phase;
      jp.unit = p.unit;
      jp.done = p.done;
      jp.total = p.total;
      jp.seconds_per_unit = p.seconds_per_unit;
      jp.eta_seconds = p.eta_seconds;
      if (p.kind == ProgressEvent::Kind::kTick && p.phase.rfind("denoise", 0) == 0) {
        ++totals_.steps;
        totals_.step_seconds += p.unit_seconds;
        totals_.last_seconds_per_step = p.unit_seconds;
      }
      const char* kinds[] = {"begin", "tick", "end", "message"};
      json data = {{"event", kinds[static_cast<int>(p.kind)]},
                   {"phase", p.phase},
                   {"unit", p.unit},
                   {"done", p.done},
                   {"total", p.total},
                   {"seconds_per_unit", p.seconds_per_unit},
                   {"eta_seconds", p.eta_seconds}};
      if (p.kind == ProgressEvent::Kind::kMessage) data["text"] = p.text;
      push_event(e, "progress", std::move(data));
    };
    JobState outcome = JobState::kSucceeded;
    std::string error;
    JobResult result;
    try {
      result = runner_(job, cancelled, progress);
    } catch (const Cancelled&) {
      outcome = JobState::kCancelled;
      error = "cancelled while running";
    } catch (const std::exception& e) {
      outcome = JobState::kFailed;
      error = e.what();
    }
    release_thread_scratch();
    malloc_trim(0);  // the run's activations go back to the system: idle memory stays flat
    std::lock_guard lock(mutex_);
    Entry& e = jobs_.at(id);
    running_.clear();
    if (outcome == JobState::kCancelled && stopping_ && !user_cancelled_) {
      // interrupted by a shutdown: it runs again after the restart
      e.job.state = JobState::kQueued;
      e.job.started = 0;
      e.job.progress = {};
      try {
        save(e.job);
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "vidax serve: job %s: %s\n", id.c_str(), ex.what());
      }
      return;
    }
    if (outcome == JobState::kSucceeded) {
      e.job.video_file = result.video_file;
      e.job.seconds_per_step = result.seconds_per_step;
    }
    finish(e, outcome, error);
  }
}

}  // namespace vidax::serve
