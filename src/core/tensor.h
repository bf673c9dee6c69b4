// Tensor: a typed, strided view of a Storage. Up to 8 int64 extents; strides in elements.
// Views (reshape of contiguous data, slice, select, permute) share storage and copy nothing.
// Owned storage is writable; tensors over memory-mapped checkpoint files are read-only.
// A Tensor is a cheap handle (shared_ptr + shape); concurrent reads are safe, concurrent writes
// to the same elements are not.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace vidax {

// 16-bit float storage types; arithmetic always goes through f32.
struct BFloat16 {
  uint16_t bits;
};
struct Float16 {
  uint16_t bits;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<Float16>() {
  return DType::kF16;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kU8;
}

class Tensor {
 public:
  Tensor() = default;

  // New owned, zero-filled, contiguous tensor.
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32);
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                             size_t byte_offset = 0);
  static Tensor from_floats(std::span<const float> values, const Shape& shape);
  // A view with explicit strides (elements, >= 0, one per dimension), as checkpoints store views
  // (torch .pth): every addressed element must lie inside the storage.
  static Tensor from_storage_strided(std::shared_ptr<Storage> storage, const Shape& shape,
                                     std::span<const int64_t> strides, DType dtype,
                                     size_t byte_offset = 0);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  size_t itemsize() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  int64_t stride(int i) const { return strides_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  bool is_contiguous() const;
  bool writable() const { return storage_ && storage_->writable(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  const void* raw_data() const { return storage_->data() + byte_offset_; }
  void* raw_mutable_data() const;

  template <typename T>
  const T* data() const {
    VIDAX_CHECK(dtype_ == dtype_of<T>(), "tensor holds ", dtype_name(dtype_), ", accessed as ",
                dtype_name(dtype_of<T>()));
    return static_cast<const T*>(raw_data());
  }
  template <typename T>
  T* mutable_data() const {
    VIDAX_CHECK(dtype_ == dtype_of<T>(), "tensor holds ", dtype_name(dtype_), ", accessed as ",
                dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_mutable_data());
  }

  // Views.
  Tensor reshape(const Shape& shape) const;  // requires contiguous data; one extent may be -1
  Tensor slice(int dim, int64_t start, int64_t end) const;
  Tensor select(int dim, int64_t index) const;
  Tensor permute(std::initializer_list<int> order) const;
  Tensor unsqueeze(int dim) const;

  // Copies.
  Tensor contiguous() const;     // returns *this when already contiguous
  Tensor clone() const;          // always a new owned contiguous copy
  Tensor to(DType dtype) const;  // new owned contiguous tensor; float<->float conversions only
  void copy_from(const Tensor& src) const;  // same shape and dtype; this must be writable

  std::vector<float> to_float_vector() const;  // any float dtype, any strides
  std::string describe() const;                // "F32 [16, 3, 4, 6]"

 private:
  std::shared_ptr<Storage> storage_;
  size_t byte_offset_ = 0;
  Shape shape_;
  std::array<int64_t, kMaxDims> strides_{};
  DType dtype_ = DType::kF32;

  void set_contiguous_strides();
};

}  // namespace vidax
