#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace vidax {

AtomicFile::AtomicFile(std::string target)
    : target_(std::move(target)), tmp_(target_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create temporary file " + tmp_);
  guard_ = TempPathGuard::file(tmp_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write_all(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write " + tmp_);
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("cannot fsync " + tmp_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close " + tmp_);
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail("cannot rename " + tmp_ + " into place");
  committed_ = true;
  guard_.release();
  // Persist the rename itself; failing to sync the folder does not undo a complete file.
  const std::filesystem::path parent = std::filesystem::path(target_).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void AtomicFile::fail(const std::string& what) const {
  const int err = errno;
  throw_input_error(target_, ": ", what, ": ", std::strerror(err));
}

}  // namespace vidax
