// Registry of in-progress temporary outputs, so that an interrupted run leaves no partial file.
//
// Writers create their output under a temporary name next to the target and rename it into place
// when complete (see io/video_writer.h, io/png.h). While such a temporary exists it is registered
// here. `install_temp_cleanup_handlers()` installs SIGINT / SIGTERM / SIGHUP handlers that remove
// every registered temporary and then re-raise the signal with its default action, so the process
// still dies of the signal (exit status 128 + signo in a shell) and nothing half-written remains.
//
// The handler may only call async-signal-safe functions, so the registry is a fixed array of
// slots with fixed-size path buffers (no allocation, no locks); a slot is published with an atomic
// store after its path is written. A folder of numbered files (frame_00000.png, ...) is
// registered with its naming pattern and a count, because listing a folder (opendir/readdir) is
// not async-signal-safe: the handler unlinks prefix+index+suffix for index < count, then the
// folder itself.
//
// Thread safety: registering, updating and releasing guards is safe from any thread; each guard
// is used by one thread at a time. The handler may run at any moment on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace vidax {

// Registration of one temporary (a file, or a folder of numbered files). Move-only; the
// destructor unregisters. Unregistering never deletes anything: removing the temporary on the
// normal (non-signal) paths stays the owner's job.
class TempPathGuard {
 public:
  TempPathGuard() = default;
  // Registers a file. Throws InputError if the path is longer than the registry can hold or all
  // slots are taken (too many outputs in progress at once).
  static TempPathGuard file(const std::string& path);
  // Registers `folder`, which will hold files named prefix + index (zero-padded to `digits`) +
  // suffix; `set_file_count` says how many indices may exist.
  static TempPathGuard numbered_folder(const std::string& folder, const std::string& prefix,
                                       const std::string& suffix, int digits);

  TempPathGuard(TempPathGuard&& other) noexcept;
  TempPathGuard& operator=(TempPathGuard&& other) noexcept;
  TempPathGuard(const TempPathGuard&) = delete;
  TempPathGuard& operator=(const TempPathGuard&) = delete;
  ~TempPathGuard();

  // Numbered folders: files with index < count may exist. Call *before* creating file `count-1`
  // so that a signal arriving while it is being written still removes it.
  void set_file_count(int64_t count);
  void release();  // unregister now (idempotent)
  bool active() const { return slot_ >= 0; }

 private:
  explicit TempPathGuard(int slot) : slot_(slot) {}
  int slot_ = -1;
};

// Installs the SIGINT, SIGTERM and SIGHUP handlers (idempotent, thread-safe). Signals that were
// set to be ignored (SIG_IGN, e.g. under nohup) stay ignored.
void install_temp_cleanup_handlers();

// For runs that can stop early with a useful result (a streaming rollout publishes the chunks
// it finished, so it calls this once it has some): after install_temp_cleanup_handlers(), makes
// the first SIGINT only set a flag (and print that the run is finishing what it has; Ctrl-C
// again aborts) that the run polls with interrupt_requested(); a second SIGINT, SIGTERM and
// SIGHUP clean up and die as before.
void install_graceful_interrupt();
bool interrupt_requested();

// What the handler does before re-raising: removes every registered temporary. Async-signal-safe.
// Exposed for tests and for fatal-error paths.
void remove_registered_temp_paths() noexcept;

// Number of registered temporaries (for tests).
size_t registered_temp_path_count();

// "<path>.tmp.<pid>": the temporary name used next to `path` (any trailing '/' removed first).
std::string temp_path_for(const std::string& path);

// Small file helpers shared by the writers. Failures throw InputError naming `path` (or
// `target`) and the strerror text.
// Creates (or truncates) `path`, writes `bytes`, optionally fsyncs, closes.
void write_whole_file(const std::string& path, std::span<const uint8_t> bytes, bool sync);
// fsync of a file or folder that already exists.
void sync_path(const std::string& path);
// rename(2) `temp` onto `target`, then fsync the folder holding `target` so the rename itself is
// durable (a failure of that last fsync is ignored: the complete file is already in place).
void rename_into_place(const std::string& temp, const std::string& target);

}  // namespace vidax
