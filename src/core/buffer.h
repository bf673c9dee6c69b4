// Buffer<T>: uninitialised, 64-byte aligned scratch memory for hot loops (no zero-fill, unlike
// Tensor::zeros; huge pages from 4 MiB, core/aligned_memory.h). Move-only; not thread-safe for
// concurrent resize.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

#include "core/aligned_memory.h"

namespace vidax {

template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n) { resize(n); }
  ~Buffer() { std::free(data_); }
  Buffer(Buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Grows (contents are not preserved); never shrinks.
  void resize(size_t n) {
    if (n <= size_) return;
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    data_ = static_cast<T*>(allocate_aligned(n * sizeof(T)));
    size_ = n;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vidax
