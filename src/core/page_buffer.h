// PageBuffer: zero-initialised anonymous memory (its own mapping, page aligned) whose pages past
// some offset can be handed back to the operating system while the mapping and its contents
// before that offset stay. For buffers that are briefly larger than their steady state: the
// Wan VAE's causal convs keep 2 carried frames resident and append the new frame behind them
// only while the conv runs, so the conv reads one contiguous window without a staging copy.
// Released pages read as zeros again (Linux MADV_DONTNEED); callers must not rely on that.
//
// Move-only; not thread-safe for concurrent release() / destruction.
#pragma once

#include <cstddef>
#include <utility>

namespace vidax {

class PageBuffer {
 public:
  PageBuffer() = default;
  explicit PageBuffer(size_t bytes);  // throws std::bad_alloc when the mapping fails
  ~PageBuffer();
  PageBuffer(PageBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

  // Drops the whole pages at or after byte `keep` from the resident set (the bytes before
  // `keep` are untouched; the partial page holding byte keep - 1 stays). The address range
  // stays valid; writing there faults fresh zero pages in.
  void release_from(size_t keep);

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vidax
