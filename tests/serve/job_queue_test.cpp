// Job records (serve/job.h) and the queue's state machine and restart (serve/job_queue.h). The
// runner here is a function of the test: what it does to a job is what is under test; the real
// generation runner is exercised end to end by tests/serve/server_test.py.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "serve/job_queue.h"

namespace vidax::serve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("vidax_queue_test_" + new_job_id());
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

Job make_job(double created) {
  Job j;
  j.id = new_job_id();
  j.created = created;
  j.request = {{"prompt", "x"}};
  return j;
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// Polls until `done` holds (the worker thread moves jobs along).
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(JobId, OnlyWhatNewJobIdMakes) {
  const std::string id = new_job_id();
  EXPECT_TRUE(valid_job_id(id));
  EXPECT_NE(id, new_job_id());
  for (const char* bad : {"", "0123456789abcde", "0123456789abcdef0", "0123456789ABCDEF",
                          "../../etc/passwd", "0123456789abcde/", "0123456789abcd.."})
    EXPECT_FALSE(valid_job_id(bad)) << bad;
}

TEST(JobRecord, RoundTripsAndRefusesMalformedRecords) {
  Job j = make_job(12.5);
  j.state = JobState::kSucceeded;
  j.started = 13;
  j.finished = 20;
  j.seconds_per_step = 0.25;
  j.video_file = j.id + ".mp4";
  const Job back = Job::from_record(j.to_record());
  EXPECT_EQ(back.id, j.id);
  EXPECT_EQ(back.state, JobState::kSucceeded);
  EXPECT_EQ(back.request, j.request);
  EXPECT_EQ(back.finished, 20);
  EXPECT_EQ(back.to_json()["content"], "/v1/videos/" + j.id + "/content");
  EXPECT_EQ(back.to_json()["timings"]["run_seconds"], 7.0);

  auto refused = [](json r) {
    try {
      Job::from_record(r);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  json r = j.to_record();
  EXPECT_EQ(refused(json::array()), "job record: field 'format' is missing");
  json bad = r;
  bad["status"] = "paused";
  EXPECT_NE(refused(bad).find("job state 'paused'"), std::string::npos);
  bad = r;
  bad["id"] = "../../x";
  EXPECT_NE(refused(bad).find("is not a job id"), std::string::npos);
  bad = r;
  bad["video_file"] = "../../etc/passwd";
  EXPECT_NE(refused(bad).find("video_file"), std::string::npos);
  bad = r;
  bad["created"] = "yesterday";
  EXPECT_EQ(refused(bad), "job record: field 'created' has the wrong type");
  bad = r;
  bad["format"] = "vidax-serve-job-9";
  EXPECT_NE(refused(bad).find("expected vidax-serve-job-1"), std::string::npos);
}

TEST(JobQueue, RunsJobsInOrderAndRecordsEveryState) {
  TempDir dir;
  std::vector<std::string> ran;
  std::mutex ran_mutex;
  JobQueue q(dir.str(), 8, [&](const Job& job, const auto&, const auto& progress) {
    ProgressEvent e;
    e.kind = ProgressEvent::Kind::kTick;
    e.phase = "denoise";
    e.done = 1;
    e.total = 1;
    e.unit_seconds = 0.5;
    progress(e);
    std::lock_guard lock(ran_mutex);
    ran.push_back(job.id);
    return JobResult{0.5, job.id + ".mp4"};
  });
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    Job j = make_job(i);
    ids.push_back(j.id);
    q.submit(j);
  }
  ASSERT_TRUE(eventually([&] { return q.metrics().succeeded == 4; }));
  EXPECT_EQ(ran, ids);
  for (const std::string& id : ids) {
    const Job j = *q.get(id);
    EXPECT_EQ(j.state, JobState::kSucceeded);
    EXPECT_EQ(j.video_file, id + ".mp4");
    std::ifstream in(dir / (id + ".job.json"));
    EXPECT_EQ(json::parse(in)["status"], "succeeded");
    const auto batch = q.wait_events(id, 0, 0);
    ASSERT_TRUE(batch.has_value());
    EXPECT_TRUE(batch->terminal);
    ASSERT_EQ(batch->events.size(), 4u);  // queued, running, one progress tick, succeeded
    EXPECT_EQ(batch->events.front().data["status"], "queued");
    EXPECT_EQ(batch->events.back().data["status"], "succeeded");
    for (size_t i = 1; i < batch->events.size(); ++i)
      EXPECT_GT(batch->events[i].seq, batch->events[i - 1].seq);
  }
  const QueueMetrics m = q.metrics();
  EXPECT_EQ(m.steps, 4);
  EXPECT_DOUBLE_EQ(m.step_seconds, 2.0);
  EXPECT_FALSE(q.wait_events("0123456789abcdef", 0, 0).has_value());
}

TEST(JobQueue, BoundedQueueCancellationAndFailures) {
  TempDir dir;
  std::atomic<bool> release{false};
  JobQueue q(dir.str(), 2,
             [&](const Job& job, const std::function<bool()>& cancelled, const auto&) -> JobResult {
               if (job.request.value("fail", false)) throw InputError("the model refused it");
               while (!release) {
                 if (cancelled()) throw Cancelled("stopped");
                 std::this_thread::sleep_for(std::chrono::milliseconds(1));
               }
               return JobResult{0.1, job.id + ".mp4"};
             });
  Job running = make_job(1);
  q.submit(running);
  ASSERT_TRUE(eventually([&] { return q.get(running.id)->state == JobState::kRunning; }));
  Job a = make_job(2), b = make_job(3), c = make_job(4);
  q.submit(a);
  q.submit(b);
  EXPECT_THROW(q.submit(c), QueueFull);
  EXPECT_FALSE(fs::exists(dir / (c.id + ".job.json")));  // refused: no record
  EXPECT_EQ(q.cancel(a.id), CancelOutcome::kCancelled);  // queued: at once
  EXPECT_EQ(q.get(a.id)->state, JobState::kCancelled);
  EXPECT_EQ(q.cancel(a.id), CancelOutcome::kAlreadyFinished);
  EXPECT_EQ(q.cancel("0123456789abcdef"), CancelOutcome::kNotFound);
  q.submit(c);                                                  // a slot is free again
  EXPECT_EQ(q.cancel(running.id), CancelOutcome::kCancelling);  // running: at its next check
  ASSERT_TRUE(eventually([&] { return q.get(running.id)->state == JobState::kCancelled; }));
  EXPECT_EQ(q.get(running.id)->error, "cancelled while running");
  release = true;
  ASSERT_TRUE(eventually([&] { return q.get(c.id)->state == JobState::kSucceeded; }));
  EXPECT_EQ(q.get(b.id)->state, JobState::kSucceeded);
  Job failing = make_job(5);
  failing.request["fail"] = true;
  q.submit(failing);
  ASSERT_TRUE(eventually([&] { return q.get(failing.id)->state == JobState::kFailed; }));
  EXPECT_EQ(q.get(failing.id)->error, "the model refused it");
  const QueueMetrics m = q.metrics();
  EXPECT_EQ(m.succeeded, 2);
  EXPECT_EQ(m.cancelled, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.queued + m.running, 0);
}

TEST(JobQueue, RestartRebuildsTheListFromTheFolder) {
  TempDir dir;
  Job done = make_job(1), lost = make_job(2), crashed = make_job(3), waiting = make_job(4);
  done.state = lost.state = JobState::kSucceeded;
  done.video_file = done.id + ".mp4";
  lost.video_file = lost.id + ".mp4";  // its video was deleted by hand
  crashed.state = JobState::kRunning;
  for (const Job* j : {&done, &lost, &crashed, &waiting})
    write_text(dir / (j->id + ".job.json"), j->to_record().dump());
  write_text(dir / done.video_file, "mp4");
  write_text(dir / (crashed.id + ".mp4.tmp.999999999"), "half a video");  // left by a killed server
  write_text(dir / "0123456789abcdef.job.json", "{not json");             // skipped with a message
  write_text(dir / "notes.txt.tmp.1", "not ours");                        // not touched

  std::vector<std::string> ran;
  JobQueue q(dir.str(), 4, [&](const Job& job, const auto&, const auto&) {
    ran.push_back(job.id);
    return JobResult{0.1, job.id + ".mp4"};
  });
  ASSERT_TRUE(eventually([&] { return q.get(waiting.id)->state == JobState::kSucceeded; }));
  EXPECT_EQ(ran, std::vector<std::string>{waiting.id});
  EXPECT_EQ(q.get(done.id)->state, JobState::kSucceeded);
  EXPECT_EQ(q.get(lost.id)->state, JobState::kFailed);
  EXPECT_NE(q.get(lost.id)->error.find("is gone"), std::string::npos);
  EXPECT_EQ(q.get(crashed.id)->state, JobState::kFailed);
  EXPECT_EQ(q.get(crashed.id)->error, "the server stopped while this job was running");
  EXPECT_FALSE(fs::exists(dir / (crashed.id + ".mp4.tmp.999999999")));
  EXPECT_TRUE(fs::exists(dir / "notes.txt.tmp.1"));
  EXPECT_FALSE(q.get("0123456789abcdef").has_value());
  EXPECT_EQ(q.list().size(), 4u);
  EXPECT_EQ(q.list().front().id, waiting.id);  // newest first
}

TEST(JobQueue, OneQueuePerFolder) {
  TempDir dir;
  auto runner = [](const Job& job, const auto&, const auto&) {
    return JobResult{0, job.id + ".mp4"};
  };
  {
    JobQueue first(dir.str(), 4, runner);
    try {
      JobQueue second(dir.str(), 4, runner);
      ADD_FAILURE() << "a second queue opened the same folder";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("another vidax serve is using this folder"),
                std::string::npos);
    }
  }
  JobQueue again(dir.str(), 4, runner);  // the first one's lock went with it
  EXPECT_TRUE(again.list().empty());
}

TEST(JobQueue, EventIdsGrowAcrossRestarts) {
  TempDir dir;
  Job j = make_job(1);
  int64_t last = 0;
  auto runner = [](const Job& job, const auto&, const auto&) {
    return JobResult{0, job.id + ".mp4"};
  };
  {
    JobQueue q(dir.str(), 4, runner);
    q.submit(j);
    ASSERT_TRUE(eventually([&] { return q.get(j.id)->state == JobState::kSucceeded; }));
    last = q.wait_events(j.id, 0, 0)->events.back().seq;
  }
  write_text(dir / (j.id + ".mp4"), "mp4");
  JobQueue q(dir.str(), 4, runner);
  const auto batch = q.wait_events(j.id, 0, 0);
  ASSERT_EQ(batch->events.size(), 1u);  // a restored job: its status
  EXPECT_GT(batch->events.front().seq, last);
}

TEST(JobQueue, ShutdownQueuesTheRunningJobAgain) {
  TempDir dir;
  Job j = make_job(1);
  {
    JobQueue q(dir.str(), 4,
               [&](const Job&, const std::function<bool()>& cancelled, const auto&) -> JobResult {
                 while (!cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                 throw Cancelled("stopped");
               });
    q.submit(j);
    ASSERT_TRUE(eventually([&] { return q.get(j.id)->state == JobState::kRunning; }));
    q.shutdown();
    EXPECT_EQ(q.get(j.id)->state, JobState::kQueued);
    EXPECT_THROW(q.submit(make_job(2)), QueueFull);
  }
  std::ifstream in(dir / (j.id + ".job.json"));
  EXPECT_EQ(json::parse(in)["status"], "queued");
}

}  // namespace
}  // namespace vidax::serve
