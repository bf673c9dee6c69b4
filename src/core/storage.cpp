#include "core/storage.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/aligned_memory.h"
#include "core/error.h"

namespace vidax {
namespace {

class OwnedStorage final : public Storage {
 public:
  explicit OwnedStorage(size_t bytes) {
    const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;  // tail zeroed too
    void* p = allocate_aligned(rounded);
    std::memset(p, 0, rounded);
    data_ = static_cast<std::byte*>(p);
    bytes_ = bytes;
    writable_ = true;
  }
  ~OwnedStorage() override { std::free(data_); }
};

class MappedStorage final : public Storage {
 public:
  MappedStorage(std::shared_ptr<MappedFile> file, size_t offset, size_t bytes)
      : file_(std::move(file)) {
    VIDAX_CHECK(offset + bytes <= file_->size(), "mapped window outside file");
    data_ = const_cast<std::byte*>(file_->data()) + offset;
    bytes_ = bytes;
    writable_ = false;
  }

 private:
  std::shared_ptr<MappedFile> file_;
};

}  // namespace

std::shared_ptr<Storage> allocate_storage(size_t bytes) {
  return std::make_shared<OwnedStorage>(bytes);
}

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_input_error(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_input_error(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_input_error(path, ": not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw_input_error(path, ": cannot map: ", std::strerror(err));
    }
    file->data_ = static_cast<std::byte*>(p);
  }
  ::close(fd);
  return file;
}

void MappedFile::release_resident_pages() const {
  if (data_ != nullptr) ::madvise(data_, size_, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

std::shared_ptr<Storage> mapped_storage(std::shared_ptr<MappedFile> file, size_t offset,
                                        size_t bytes) {
  return std::make_shared<MappedStorage>(std::move(file), offset, bytes);
}

}  // namespace vidax
