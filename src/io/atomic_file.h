// Writing a file atomically: the bytes go to a temporary file in the target's folder, which is
// fsync'ed and renamed over the target only when complete. A failed write (exception before
// commit()) removes the temporary file and leaves an existing target untouched; the temporary
// is also registered with io/temp_paths.h, so SIGINT/SIGTERM remove it too.
//
// An AtomicFile is used by one thread at a time; different targets may be written concurrently.
// Two writers of the same target in one process at the same time are not supported (they share
// the temporary name).
#pragma once

#include <cstddef>
#include <string>

#include "io/temp_paths.h"

namespace vidax {

class AtomicFile {
 public:
  // Creates `target + ".tmp.<pid>"`; InputError naming `target` on failure.
  explicit AtomicFile(std::string target);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write_all(const void* data, size_t bytes);
  // Bytes written so far (the offset the next write lands at).
  size_t written() const { return written_; }
  // fsync, rename into place, then sync the folder.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string target_;
  std::string tmp_;
  TempPathGuard guard_;  // removes tmp_ if a signal ends the process before commit()
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

}  // namespace vidax
