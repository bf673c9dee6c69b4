// Items 0..n-1 (a model's blocks) used over and over in that order, with fewer of them in memory
// than there are: items [0, pinned) are loaded once and kept; the others stream through a window
// of `window` slots, a background thread loading the next ones (in the cyclic order of use) while
// the caller computes with the current one, and release() freeing a finished one.
//
//   stream.acquire(i)   the item, waiting for its load if it is not there yet
//   stream.release(i)   done with it (a streamed item is freed, its slot goes to the next load)
//
// Use out of order (a forward that stopped half-way, then a new one from item 0) is allowed: the
// stream drops what it loaded ahead and restarts its cursor at the item asked for. A load that
// throws is rethrown by the acquire() that needed it. The loads run on one thread with its own
// OpenMP team of `loader_threads` (it shares the cores with the caller's kernels). Counters say how
// long acquire() waited and how long the loads took, so a run can report the share of its time
// spent waiting for weights.
//
// Thread-safety: acquire/release/stats from one consumer thread; the loader runs on its own.
#pragma once

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"

namespace vidax {

struct PrefetchStats {
  int64_t loads = 0;        // items loaded (pinned ones included; read-ahead, used or not)
  int64_t uses = 0;         // acquire() calls of streamed items: set by the caller, not timing
  double load_seconds = 0;  // time spent in the load function
  double wait_seconds = 0;  // time acquire() waited for a load
};

template <typename T>
class PrefetchStream {
 public:
  using LoadFn = std::function<std::unique_ptr<T>(int index)>;

  // Loads the pinned items [0, pinned) now, on this thread, then starts the loader on the first
  // streamed one, with `loader_threads` OpenMP threads. Needs 0 <= pinned <= n and, when
  // pinned < n, window >= 1. `finish_due_loads`: the destructor lets the loader finish every load
  // that is due (a free slot in the window and an item not loaded) instead of stopping at once,
  // so the loads done depend only on the acquire/release calls, never on timing: what loads
  // that are collectives across processes (a sharded DiT's gathers) need to stay matched.
  PrefetchStream(int n, int pinned, int window, LoadFn load, int loader_threads = 1,
                 bool finish_due_loads = false)
      : finish_due_loads_(finish_due_loads),
        loader_threads_(std::max(1, loader_threads)),
        n_(n),
        pinned_(pinned),
        window_(std::min(window, n - pinned)),  // no more slots than streamed items
        load_(std::move(load)),
        items_(n) {
    VIDAX_CHECK(n >= 0 && pinned >= 0 && pinned <= n && (pinned == n || window >= 1),
                "PrefetchStream: n ", n, ", pinned ", pinned, ", window ", window);
    for (int i = 0; i < pinned_; ++i) items_[static_cast<size_t>(i)] = timed_load(i);
    cursor_ = pinned_ < n_ ? pinned_ : -1;
    if (pinned_ < n_) worker_ = std::thread([this] { run(); });
  }
  PrefetchStream(const PrefetchStream&) = delete;
  PrefetchStream& operator=(const PrefetchStream&) = delete;
  ~PrefetchStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  int size() const { return n_; }
  int pinned() const { return pinned_; }
  int window() const { return window_; }

  // A pinned item (i < pinned()), without waiting.
  const T& pinned_item(int i) const {
    VIDAX_CHECK(i >= 0 && i < pinned_, "PrefetchStream::pinned_item(", i, ") of ", pinned_);
    return *items_[static_cast<size_t>(i)];
  }

  const T& acquire(int i) {
    VIDAX_CHECK(i >= 0 && i < n_, "PrefetchStream::acquire(", i, ") of ", n_);
    if (i < pinned_) return *items_[static_cast<size_t>(i)];
    std::unique_lock<std::mutex> lock(mu_);
    stats_.uses++;
    // Wait for the loader only when i is loading, or next and there is room in the window for
    // it (the window may be full of items loaded ahead that this caller skips).
    const bool coming = (loading_ == i && generation_ == load_generation_) ||
                        (cursor_ == i && outstanding_ < window_ && !error_);
    if (!items_[static_cast<size_t>(i)] && !coming) {
      // Not what the loader is heading for: drop what it loaded ahead, restart it at i.
      for (int j = pinned_; j < n_; ++j) items_[static_cast<size_t>(j)].reset();
      outstanding_ = 0;
      ++generation_;
      cursor_ = i;
      cv_.notify_all();
    }
    const auto t0 = std::chrono::steady_clock::now();
    cv_.wait(lock, [&] { return items_[static_cast<size_t>(i)] != nullptr || error_; });
    stats_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!items_[static_cast<size_t>(i)]) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      // The next acquire restarts the loader at the item it asks for, with an empty window.
      for (int j = pinned_; j < n_; ++j) items_[static_cast<size_t>(j)].reset();
      ++generation_;
      cursor_ = -1;
      outstanding_ = 0;
      std::rethrow_exception(e);
    }
    return *items_[static_cast<size_t>(i)];
  }

  void release(int i) {
    if (i < pinned_) return;
    std::unique_ptr<T> done;
    uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done = std::move(items_[static_cast<size_t>(i)]);
      generation = generation_;
    }
    if (!done) return;
    done.reset();  // freed (outside the lock) before its slot goes to the next load
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (generation == generation_ && outstanding_ > 0) --outstanding_;
    }
    cv_.notify_all();
  }

  PrefetchStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  std::unique_ptr<T> timed_load(int i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<T> item = load_(i);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(mu_);
    stats_.loads++;
    stats_.load_seconds += dt;
    return item;
  }

  void run() {
    omp_set_num_threads(loader_threads_);
    std::unique_lock<std::mutex> lock(mu_);
    int skipped = 0;
    for (;;) {
      auto due = [&] { return cursor_ >= 0 && outstanding_ < window_ && !error_; };
      cv_.wait(lock, [&] { return stop_ || due(); });
      if (stop_ && !(finish_due_loads_ && due())) return;
      if (items_[static_cast<size_t>(cursor_)]) {  // still loaded (used out of order): skip it
        cursor_ = cursor_ + 1 < n_ ? cursor_ + 1 : pinned_;
        if (++skipped >= n_ - pinned_) {  // every streamed item is loaded: wait for a change
          if (stop_) return;              // (nothing is due when stopping)
          cv_.wait(lock);
          skipped = 0;
        }
        continue;
      }
      skipped = 0;
      const int i = cursor_;
      const uint64_t generation = generation_;
      loading_ = i;
      load_generation_ = generation;
      ++outstanding_;
      lock.unlock();
      std::unique_ptr<T> item;
      std::exception_ptr failure;
      try {
        item = timed_load(i);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      loading_ = -1;
      if (generation != generation_) continue;  // restarted meanwhile: the item is not wanted
      if (failure) {
        error_ = failure;
        --outstanding_;
      } else {
        items_[static_cast<size_t>(i)] = std::move(item);
        cursor_ = i + 1 < n_ ? i + 1 : pinned_;  // the cyclic order of use
      }
      cv_.notify_all();
    }
  }

  const bool finish_due_loads_;
  const int loader_threads_;
  const int n_, pinned_, window_;
  LoadFn load_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<T>> items_;
  int cursor_ = -1;      // the next item to load (-1: none until an acquire asks)
  int loading_ = -1;     // the item being loaded
  int outstanding_ = 0;  // streamed items loaded or loading, not yet released
  uint64_t generation_ = 0, load_generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  PrefetchStats stats_;
  std::thread worker_;
};

}  // namespace vidax
