// The job queue of `vidax serve`: a bounded FIFO of video jobs and one worker thread that runs
// them one at a time (the machine is the limit), the job list kept in the output folder so it
// survives a restart, cancellation, and the per-job event stream behind the SSE endpoint.
//
// Lifecycle of a job: submit() -> queued -> running -> succeeded | failed | cancelled. cancel()
// takes a queued job out at once; a running one is asked to stop (the runner polls `cancelled`
// between steps) and is cancelled when the runner returns. Every state change is written to
// `<output>/<id>.job.json` before it becomes visible.
//
// On construction the folder is scanned: finished jobs come back as they were, queued ones are
// queued again in their original order, a job found running (the server died under it) fails
// with a message saying so; temporaries left by a killed process (`<id>....tmp.<pid>`) are
// removed. shutdown() (or the destructor) stops the worker: a running job is interrupted and
// queued again, so a restart runs it from the start. The event streams of the 64 most recently
// ended jobs are kept whole; older ended jobs keep only their terminal event.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/progress.h"
#include "serve/job.h"

namespace vidax::serve {

// What a runner reports back of a finished video.
struct JobResult {
  double seconds_per_step = 0;
  std::string video_file;  // relative to the output folder
};

// Runs one job. Polls `cancelled` often (between steps) and then throws vidax::Cancelled; reports
// progress through `progress` (called on the worker thread). Any other exception fails the job
// with its message.
using JobRunner =
    std::function<JobResult(const Job& job, const std::function<bool()>& cancelled,
                            const std::function<void(const ProgressEvent&)>& progress)>;

class QueueFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One entry of a job's event stream: `kind` "status" or "progress"; `seq` grows with every event
// of the server and starts each boot above the last boot's (it counts from the start time in
// microseconds), so a client resuming with Last-Event-ID after a restart misses nothing.
struct JobEvent {
  int64_t seq = 0;
  std::string kind;
  nlohmann::json data;
};

struct QueueMetrics {
  int64_t queued = 0, running = 0;
  int64_t succeeded = 0, failed = 0, cancelled = 0;  // terminal jobs since this process started
  int64_t steps = 0;                                 // denoising steps run
  double step_seconds = 0;                           // their total time
  double last_seconds_per_step = 0;
};

enum class CancelOutcome { kNotFound, kCancelled, kCancelling, kAlreadyFinished };

class JobQueue {
 public:
  // `max_queued`: jobs that may wait (not counting the running one); submit() beyond it throws
  // QueueFull. Throws InputError if `output_dir` cannot be created or read, or when another
  // process holds it (an flock on `<output_dir>/.vidax-serve.lock` for the queue's life).
  JobQueue(std::string output_dir, size_t max_queued, JobRunner runner);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // Queues `job` (its id, request and created time set by the caller; state queued). Writes its
  // record first. Returns the job as accepted (queued: the worker may already have started it by
  // the time the caller looks again). Throws QueueFull, or InputError when the record cannot be
  // written.
  Job submit(Job job);
  std::optional<Job> get(const std::string& id) const;
  std::vector<Job> list() const;  // newest first
  CancelOutcome cancel(const std::string& id);
  QueueMetrics metrics() const;
  const std::string& output_dir() const { return output_dir_; }

  // Events of job `id` after `after_seq`, waiting up to `timeout_s` for one when there are none.
  // `terminal` says the job has ended (no event will follow the ones returned). nullopt: no job.
  struct EventBatch {
    std::vector<JobEvent> events;
    bool terminal = false;
  };
  std::optional<EventBatch> wait_events(const std::string& id, int64_t after_seq,
                                        double timeout_s) const;

  // Asks the worker to stop without waiting: no new job starts, a running one is interrupted
  // (and queued again), event streams end. Idempotent; safe from a signal-handling thread.
  void request_stop();
  // request_stop(), then waits for the worker. Idempotent.
  void shutdown();

 private:
  struct Entry {
    Job job;
    std::vector<JobEvent> events;
  };
  void worker();
  void restore();
  void save(const Job& job) const;  // atomic write of the record; throws InputError
  void push_event(Entry& e, std::string kind, nlohmann::json data);
  void finish(Entry& e, JobState state, const std::string& error);

  const std::string output_dir_;
  const size_t max_queued_;
  const JobRunner runner_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  mutable std::condition_variable event_cv_;
  std::map<std::string, Entry> jobs_;
  // Ended jobs, oldest first: the newest kFullEventLogs keep their whole event stream, older
  // ones only their terminal event, so a long-lived server's memory does not grow per job by
  // more than the job's record.
  static constexpr size_t kFullEventLogs = 64;
  std::deque<std::string> ended_;
  std::deque<std::string> queue_;
  std::string running_;
  std::atomic<bool> cancel_running_{false};
  bool user_cancelled_ = false;  // the running job's cancel came from cancel(), not shutdown
  bool stopping_ = false;
  int64_t next_seq_ = 0;
  int lock_fd_ = -1;
  QueueMetrics totals_;
  std::thread worker_;
};

}  // namespace vidax::serve
