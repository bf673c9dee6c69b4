// Per-thread scratch that kernels keep from call to call (a denoising loop calls them with the
// same shapes thousands of times, and a fresh allocation would page-fault every time), and the
// one place that frees all of it between the phases of a run (text encoder, DiT, VAE), so a
// phase does not carry the previous phase's largest buffers.
//
//   thread_local ThreadScratch<std::vector<float>> ws;   // ws.value is the buffer
//   ...
//   release_thread_scratch();   // between phases: every thread's buffers become empty
//
// Thread-safety: each ThreadScratch is used by its own thread; registration is locked.
// release_thread_scratch() must not run while a kernel is running (the pipeline calls it between
// phases, from the thread that drives the models).
#pragma once

#include <cstddef>

namespace vidax {

class ThreadScratchBase {
 public:
  ThreadScratchBase();
  virtual ~ThreadScratchBase();
  ThreadScratchBase(const ThreadScratchBase&) = delete;
  ThreadScratchBase& operator=(const ThreadScratchBase&) = delete;
  virtual void release() = 0;
};

// `T` must be default-constructible and move-assignable; release() replaces the value with a
// default-constructed one (freeing what it held).
template <typename T>
class ThreadScratch final : public ThreadScratchBase {
 public:
  T value{};
  void release() override { value = T{}; }
};

// Frees every registered scratch of every thread; returns how many were registered.
size_t release_thread_scratch();

}  // namespace vidax
