// Element types. Float8 types are storage-only: they are converted to f32/bf16 at load time.
// Names follow safetensors ("F32", "BF16", "F8_E4M3", ...). Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace vidax {

// kU8 is raw bytes, storage only: 8-bit images (the synthetic video dataset) and the
// sentencepiece model ComfyUI embeds in text-encoder files. Not a float type.
enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kF8E5M2, kI64, kI32, kU8 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // safetensors spelling
std::optional<DType> dtype_from_name(std::string_view name);
bool is_float(DType dtype);

// Scalar conversions (the vectorized bulk versions live in core/convert.h).
inline float bf16_to_f32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, NaN kept quiet (as torch does).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float f);
float f8e4m3_to_f32(uint8_t bits);  // "fn" variant: no infinities, 0x7f/0xff are NaN
float f8e5m2_to_f32(uint8_t bits);
// Nearest e4m3fn value (ties to the even code), saturating at +-448; NaN gives 0x7f.
uint8_t f32_to_f8e4m3(float f);

}  // namespace vidax
