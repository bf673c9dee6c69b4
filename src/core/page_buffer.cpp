#include "core/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace vidax {
namespace {

size_t page_size() {
  static const size_t n = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return n;
}

}  // namespace

PageBuffer::PageBuffer(size_t bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<std::byte*>(p);
  size_ = bytes;
}

PageBuffer::~PageBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

void PageBuffer::release_from(size_t keep) {
  const size_t page = page_size();
  const size_t begin = (keep + page - 1) / page * page;
  if (data_ == nullptr || begin >= size_) return;
  ::madvise(data_ + begin, size_ - begin, MADV_DONTNEED);
}

}  // namespace vidax
