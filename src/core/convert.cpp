#include "core/convert.h"

#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace vidax {
namespace {

float load_one(const void* src, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(src)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::kF8E4M3: return f8e4m3_to_f32(static_cast<const uint8_t*>(src)[i]);
    case DType::kF8E5M2: return f8e5m2_to_f32(static_cast<const uint8_t*>(src)[i]);
    default: VIDAX_CHECK(false, "not a float dtype");
  }
  return 0;
}

void store_one(void* dst, DType t, size_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(dst)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
    default: VIDAX_CHECK(false, "cannot convert into ", dtype_name(t));
  }
}

}  // namespace

void convert_floats_reference(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                              size_t n) {
  for (size_t i = 0; i < n; ++i) store_one(dst, dst_dtype, i, load_one(src, src_dtype, i));
}

void convert_floats(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n) {
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, n * dtype_size(src_dtype));
    return;
  }
  convert_floats_reference(src, src_dtype, dst, dst_dtype, n);
}

}  // namespace vidax
