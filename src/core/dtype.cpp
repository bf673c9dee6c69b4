#include "core/dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace vidax {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return 1;
    case DType::kI64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kU8:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kF8E5M2:
      return "F8_E5M2";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E5M2,
                  DType::kI64, DType::kI32, DType::kU8}) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

bool is_float(DType dtype) {
  return dtype != DType::kI64 && dtype != DType::kI32 && dtype != DType::kU8;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24
      float f = std::ldexp(static_cast<float>(man), -24);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow (rounds to inf)
  if (abs < 0x38800000u) {                        // subnormal or zero in f16
    float a;
    std::memcpy(&a, &abs, 4);
    // a * 2^24 rounded to nearest even gives the subnormal mantissa.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

float f8e4m3_to_f32(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xf;
  const int man = b & 0x7;
  if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);  // 2^-6 * man/8
  return sign * std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
}

uint8_t f32_to_f8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.0f) return static_cast<uint8_t>(sign | 0x7e);  // saturate at the largest finite
  int code = 0;
  if (a < 0x1p-6f) {
    // Subnormals: steps of 2^-9 (code 8 is 2^-6, the smallest normal, so rounding up is right).
    code = static_cast<int>(std::nearbyint(a * 512.0f));
  } else {
    int e = 0;
    const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    // a = (1 + q / 8) * 2^(e - 1): q from the mantissa, rounded to nearest even (exact scaling).
    const int q = static_cast<int>(std::nearbyint((m * 2.0f - 1.0f) * 8.0f));
    code = ((e - 1 + 7) << 3) + q;  // q == 8 carries into the exponent
  }
  return static_cast<uint8_t>(sign | std::min(code, 0x7e));
}

float f8e5m2_to_f32(uint8_t b) {
  // e5m2 is the top byte of an f16.
  return f16_to_f32(static_cast<uint16_t>(b) << 8);
}

}  // namespace vidax
