#include "core/tensor.h"

#include <algorithm>
#include <cstring>

#include "core/convert.h"

namespace vidax {

void Tensor::set_contiguous_strides() {
  int64_t s = 1;
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    strides_[static_cast<size_t>(i)] = s;
    s *= shape_[i];
  }
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t;
  t.storage_ = allocate_storage(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                            size_t byte_offset) {
  VIDAX_CHECK(storage != nullptr);
  VIDAX_CHECK(
      byte_offset + static_cast<size_t>(shape.numel()) * dtype_size(dtype) <= storage->bytes(),
      "tensor ", shape.str(), " exceeds its storage");
  Tensor t;
  t.storage_ = std::move(storage);
  t.byte_offset_ = byte_offset;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::from_storage_strided(std::shared_ptr<Storage> storage, const Shape& shape,
                                    std::span<const int64_t> strides, DType dtype,
                                    size_t byte_offset) {
  VIDAX_CHECK(storage != nullptr);
  VIDAX_CHECK(static_cast<int>(strides.size()) == shape.rank(), "strides rank ", strides.size(),
              " for shape ", shape.str());
  // Byte just past the last addressed element (callers validated that this cannot overflow).
  size_t end = byte_offset;
  if (shape.numel() > 0) {
    size_t last = 0;
    for (int i = 0; i < shape.rank(); ++i) {
      VIDAX_CHECK(strides[static_cast<size_t>(i)] >= 0, "negative stride");
      last +=
          static_cast<size_t>(shape[i] - 1) * static_cast<size_t>(strides[static_cast<size_t>(i)]);
    }
    end += (last + 1) * dtype_size(dtype);
  }
  VIDAX_CHECK(end <= storage->bytes(), "strided view ", shape.str(), " exceeds its storage");
  Tensor t;
  t.storage_ = std::move(storage);
  t.byte_offset_ = byte_offset;
  t.shape_ = shape;
  t.dtype_ = dtype;
  for (int i = 0; i < shape.rank(); ++i)
    t.strides_[static_cast<size_t>(i)] = strides[static_cast<size_t>(i)];
  return t;
}

Tensor Tensor::from_floats(std::span<const float> values, const Shape& shape) {
  VIDAX_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "size mismatch");
  Tensor t = zeros(shape, DType::kF32);
  if (!values.empty()) std::memcpy(t.raw_mutable_data(), values.data(), values.size_bytes());
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[static_cast<size_t>(i)] != s) return false;
    s *= shape_[i];
  }
  return true;
}

void* Tensor::raw_mutable_data() const {
  VIDAX_CHECK(storage_ != nullptr, "undefined tensor");
  VIDAX_CHECK(storage_->writable(), "tensor is a read-only view (memory-mapped file)");
  return storage_->data() + byte_offset_;
}

Tensor Tensor::reshape(const Shape& new_shape) const {
  VIDAX_CHECK(is_contiguous(), "reshape of a non-contiguous tensor ", describe());
  Shape s = new_shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.rank(); ++i) {
    if (s[i] == -1) {
      VIDAX_CHECK(infer < 0, "two -1 extents");
      infer = i;
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    VIDAX_CHECK(known > 0 && numel() % known == 0, "cannot infer extent");
    s[infer] = numel() / known;
  }
  VIDAX_CHECK(s.numel() == numel(), "reshape ", shape_.str(), " -> ", s.str());
  Tensor t = *this;
  t.shape_ = s;
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::slice(int d, int64_t start, int64_t end) const {
  if (d < 0) d += rank();
  VIDAX_CHECK(d >= 0 && d < rank() && 0 <= start && start <= end && end <= shape_[d], "slice [",
              start, ", ", end, ") of dim ", d, " of ", describe());
  Tensor t = *this;
  t.byte_offset_ += static_cast<size_t>(start * strides_[static_cast<size_t>(d)]) * itemsize();
  t.shape_[d] = end - start;
  return t;
}

Tensor Tensor::select(int d, int64_t index) const {
  if (d < 0) d += rank();
  Tensor s = slice(d, index, index + 1);
  std::vector<int64_t> dims;
  std::array<int64_t, kMaxDims> strides{};
  int k = 0;
  for (int i = 0; i < rank(); ++i) {
    if (i == d) continue;
    dims.push_back(s.shape_[i]);
    strides[static_cast<size_t>(k++)] = s.strides_[static_cast<size_t>(i)];
  }
  s.shape_ = Shape(dims);
  s.strides_ = strides;
  return s;
}

Tensor Tensor::permute(std::initializer_list<int> order) const {
  VIDAX_CHECK(static_cast<int>(order.size()) == rank(), "permute rank mismatch");
  Tensor t = *this;
  int i = 0;
  std::array<bool, kMaxDims> seen{};
  for (int src : order) {
    VIDAX_CHECK(src >= 0 && src < rank() && !seen[static_cast<size_t>(src)], "bad permutation");
    seen[static_cast<size_t>(src)] = true;
    t.shape_[i] = shape_[src];
    t.strides_[static_cast<size_t>(i)] = strides_[static_cast<size_t>(src)];
    ++i;
  }
  return t;
}

Tensor Tensor::unsqueeze(int d) const {
  if (d < 0) d += rank() + 1;
  VIDAX_CHECK(d >= 0 && d <= rank() && rank() < kMaxDims, "unsqueeze");
  std::vector<int64_t> dims = shape_.to_vector();
  dims.insert(dims.begin() + d, 1);
  Tensor t = *this;
  t.shape_ = Shape(dims);
  for (int i = rank(); i > d; --i)
    t.strides_[static_cast<size_t>(i)] = strides_[static_cast<size_t>(i - 1)];
  t.strides_[static_cast<size_t>(d)] =
      d < rank() ? strides_[static_cast<size_t>(d)] * shape_[d] : 1;
  return t;
}

namespace {

// Calls fn(dst_offset_elems, src_offset_elems, run) over runs of the innermost dimension.
template <typename Fn>
void for_each_run(const Shape& shape, const std::array<int64_t, kMaxDims>& strides, Fn fn) {
  const int r = shape.rank();
  if (r == 0) {
    fn(0, 0, 1);
    return;
  }
  if (shape.numel() == 0) return;
  const int64_t inner = shape[r - 1];
  const int64_t outer = shape.numel() / inner;
  std::array<int64_t, kMaxDims> idx{};
  for (int64_t o = 0; o < outer; ++o) {
    int64_t src = 0;
    for (int i = 0; i < r - 1; ++i)
      src += idx[static_cast<size_t>(i)] * strides[static_cast<size_t>(i)];
    fn(o * inner, src, inner);
    for (int i = r - 2; i >= 0; --i) {
      if (++idx[static_cast<size_t>(i)] < shape[i]) break;
      idx[static_cast<size_t>(i)] = 0;
    }
  }
}

}  // namespace

Tensor Tensor::clone() const {
  Tensor out = zeros(shape_, dtype_);
  out.copy_from(*this);
  return out;
}

// Memory-mapped safetensors data need not be aligned to its element size; a contiguous() result
// is always safe to access through typed pointers, so misaligned views are copied.
Tensor Tensor::contiguous() const {
  const bool aligned = reinterpret_cast<uintptr_t>(raw_data()) % itemsize() == 0;
  return is_contiguous() && aligned ? *this : clone();
}

void Tensor::copy_from(const Tensor& src) const {
  VIDAX_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "copy_from ", src.describe(), " into ",
              describe());
  VIDAX_CHECK(is_contiguous(), "copy_from into a non-contiguous tensor");
  const size_t is = itemsize();
  auto* dst = static_cast<std::byte*>(raw_mutable_data());
  const auto* s = static_cast<const std::byte*>(src.raw_data());
  if (src.is_contiguous()) {
    std::memcpy(dst, s, nbytes());
    return;
  }
  const int64_t inner_stride = src.rank() ? src.strides_[static_cast<size_t>(src.rank() - 1)] : 1;
  for_each_run(shape_, src.strides_, [&](int64_t d, int64_t so, int64_t run) {
    if (inner_stride == 1) {
      std::memcpy(dst + d * is, s + so * is, static_cast<size_t>(run) * is);
    } else {
      for (int64_t j = 0; j < run; ++j)
        std::memcpy(dst + (d + j) * is, s + (so + j * inner_stride) * is, is);
    }
  });
}

Tensor Tensor::to(DType dtype) const {
  VIDAX_CHECK(is_float(dtype_) && is_float(dtype), "to(): float types only, got ",
              dtype_name(dtype_), " -> ", dtype_name(dtype));
  Tensor src = contiguous();
  Tensor out = zeros(shape_, dtype);
  convert_floats(src.raw_data(), dtype_, out.raw_mutable_data(), dtype,
                 static_cast<size_t>(numel()));
  return out;
}

std::vector<float> Tensor::to_float_vector() const {
  Tensor f = dtype_ == DType::kF32 ? contiguous() : to(DType::kF32);
  const float* p = f.data<float>();
  return {p, p + f.numel()};
}

std::string Tensor::describe() const { return str_cat(dtype_name(dtype_), " ", shape_.str()); }

}  // namespace vidax
