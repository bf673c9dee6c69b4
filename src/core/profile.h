// A minimal wall-clock profiler: named buckets accumulated by ScopedTimer when profiling is on
// (off by default: one branch per scope). Timers must be used from the thread that drives the
// model (the OpenMP master), not inside parallel regions.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace vidax::profile {

void set_enabled(bool on);
bool enabled();
void reset();
void add(const char* bucket, double seconds);
// (bucket, seconds, calls), sorted by descending time.
std::vector<std::pair<std::string, std::pair<double, long>>> snapshot();

class ScopedTimer {
 public:
  explicit ScopedTimer(const char* bucket) : bucket_(enabled() ? bucket : nullptr) {
    if (bucket_) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedTimer() {
    if (bucket_)
      add(bucket_,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  const char* bucket_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace vidax::profile
