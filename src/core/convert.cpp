// Bulk float conversions. The Highway part converts through f32 vectors with integer bit
// manipulation only (no F16C, no AVX512-BF16), so every target produces exactly the bits of the
// scalar reference: round to nearest even, NaN kept a quiet NaN, f16 overflow to infinity.
// Highway 1.0.3's own DemoteTo to bf16 truncates and its emulated f16 conversions mishandle
// infinities, which is why neither is used here.

#include "core/convert.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/convert.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace vidax {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU32 = hn::RebindToUnsigned<DF>;
using DI32 = hn::RebindToSigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;  // half-width vector with as many lanes as DF
using VF = hn::Vec<DF>;

// ---- loads: N source elements -> N f32 lanes ----

struct LoadF32 {
  using T = float;
  static VF load(const T* p) { return hn::LoadU(DF(), p); }
};

struct LoadBF16 {
  using T = uint16_t;
  static VF load(const T* p) {
    const auto u32 = hn::PromoteTo(DU32(), hn::LoadU(DU16(), p));
    return hn::BitCast(DF(), hn::ShiftLeft<16>(u32));
  }
};

struct LoadF16 {
  using T = uint16_t;
  static VF load(const T* p) {
    const DU32 du;
    const DI32 di;
    const auto h = hn::PromoteTo(du, hn::LoadU(DU16(), p));
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
    const auto em = hn::And(h, hn::Set(du, 0x7fffu));  // exponent and mantissa
    // Normal numbers: move the fields into place and rebias the exponent by 127 - 15.
    const auto normal = hn::Add(hn::ShiftLeft<13>(em), hn::Set(du, 112u << 23));
    // Inf/NaN: exponent all ones, mantissa (payload) kept.
    const auto special = hn::Or(hn::ShiftLeft<13>(em), hn::Set(du, 0x7f800000u));
    // Zero and subnormals: the mantissa times 2^-24 is exact in f32.
    const auto tiny = hn::BitCast(
        du, hn::Mul(hn::ConvertTo(DF(), hn::BitCast(di, em)), hn::Set(DF(), 1.0f / 16777216.0f)));
    const auto em_i = hn::BitCast(di, em);
    auto bits = hn::IfThenElse(hn::RebindMask(du, hn::Lt(em_i, hn::Set(di, 0x400))), tiny, normal);
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(em_i, hn::Set(di, 0x7bff))), special, bits);
    return hn::BitCast(DF(), hn::Or(bits, sign));
  }
};

// e4m3fn (ComfyUI's fp8): exact in f32. Normal codes move their fields into place and rebias the
// exponent by 127 - 7; exponent 0 is m x 2^-9; 0x7f / 0xff are NaN (the canonical quiet NaN, as
// the scalar table gives).
struct LoadF8E4M3 {
  using T = uint8_t;
  static VF load(const T* p) {
    const DU32 du;
    const DI32 di;
    const auto b = hn::PromoteTo(du, hn::LoadU(hn::Rebind<uint8_t, DF>(), p));
    const auto sign = hn::ShiftLeft<24>(hn::And(b, hn::Set(du, 0x80u)));
    const auto em = hn::And(b, hn::Set(du, 0x7fu));
    const auto em_i = hn::BitCast(di, em);
    const auto normal = hn::Add(hn::ShiftLeft<20>(em), hn::Set(du, 120u << 23));
    const auto tiny =
        hn::BitCast(du, hn::Mul(hn::ConvertTo(DF(), em_i), hn::Set(DF(), 1.0f / 512.0f)));
    auto bits = hn::Or(
        hn::IfThenElse(hn::RebindMask(du, hn::Lt(em_i, hn::Set(di, 8))), tiny, normal), sign);
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Eq(em_i, hn::Set(di, 0x7f))),
                          hn::BitCast(du, hn::Set(DF(), std::numeric_limits<float>::quiet_NaN())),
                          bits);
    return hn::BitCast(DF(), bits);
  }
};

// ---- stores: N f32 lanes -> N destination elements ----

struct StoreF32 {
  using T = float;
  static void store(VF v, T* p) { hn::StoreU(v, DF(), p); }
};

// Narrows u32 lanes holding values < 2^16 and stores them.
HWY_INLINE void store_u16(hn::Vec<DU32> bits, uint16_t* p) {
  hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(DI32(), bits)), DU16(), p);
}

struct StoreBF16 {
  using T = uint16_t;
  static void store(VF v, T* p) {
    const DU32 du;
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb));
    const auto quiet_nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
    store_u16(hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded), p);
  }
};

struct StoreF16 {
  using T = uint16_t;
  static void store(VF v, T* p) {
    const DU32 du;
    const DI32 di;
    const auto u = hn::BitCast(du, v);
    const auto sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 0x8000u));
    const auto abs = hn::And(u, hn::Set(du, 0x7fffffffu));
    const auto abs_i = hn::BitCast(di, abs);
    // Normal range: round the 23-bit mantissa to 10 bits (ties to even), rebias the exponent.
    const auto lsb = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
    const auto normal = hn::ShiftRight<13>(
        hn::Sub(hn::Add(hn::Add(abs, hn::Set(du, 0xfffu)), lsb), hn::Set(du, 112u << 23)));
    // Below 2^-14: adding 0.5 puts the value on a grid of 2^-24 (the f16 subnormal step) and the
    // FP adder rounds to nearest even; the low bits are then the f16 subnormal mantissa.
    const auto magic = hn::Set(DF(), 0.5f);
    const auto tiny =
        hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(DF(), abs), magic)), hn::BitCast(du, magic));
    auto bits =
        hn::IfThenElse(hn::RebindMask(du, hn::Lt(abs_i, hn::Set(di, 0x38800000))), tiny, normal);
    // 65520 and above round to infinity; NaN becomes the canonical quiet NaN.
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x477fefff))),
                          hn::Set(du, 0x7c00u), bits);
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x7f800000))),
                          hn::Set(du, 0x7e00u), bits);
    store_u16(hn::Or(bits, sign), p);
  }
};

template <class Load, class Store>
void convert_run(const void* src_v, void* dst_v, size_t n) {
  const auto* src = static_cast<const typename Load::T*>(src_v);
  auto* dst = static_cast<typename Store::T*>(dst_v);
  const size_t lanes = hn::Lanes(DF());
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) Store::store(Load::load(src + i), dst + i);
  if (i == n) return;
  // Ragged tail through zero-padded buffers, so it takes the same (bit-exact) vector path.
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
  typename Load::T in[kMax] = {};
  typename Store::T out[kMax] = {};
  const size_t rest = n - i;
  std::memcpy(in, src + i, rest * sizeof(typename Load::T));
  Store::store(Load::load(in), out);
  std::memcpy(dst + i, out, rest * sizeof(typename Store::T));
}

template <class Load>
void convert_to(const void* src, void* dst, DType dst_dtype, size_t n) {
  switch (dst_dtype) {
    case DType::kF32:
      return convert_run<Load, StoreF32>(src, dst, n);
    case DType::kBF16:
      return convert_run<Load, StoreBF16>(src, dst, n);
    case DType::kF16:
      return convert_run<Load, StoreF16>(src, dst, n);
    default:
      VIDAX_CHECK(false, "cannot convert into ", dtype_name(dst_dtype));
  }
}

}  // namespace

// e4m3 source, F32 / BF16 / F16 destination.
void ConvertF8E4M3(const void* src, void* dst, DType dst_dtype, size_t n) {
  convert_to<LoadF8E4M3>(src, dst, dst_dtype, n);
}

// Source and destination are F32, BF16 or F16 (the caller routes F8 and same-type copies).
void ConvertFloats16And32(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n) {
  switch (src_dtype) {
    case DType::kF32:
      return convert_to<LoadF32>(src, dst, dst_dtype, n);
    case DType::kBF16:
      return convert_to<LoadBF16>(src, dst, dst_dtype, n);
    case DType::kF16:
      return convert_to<LoadF16>(src, dst, dst_dtype, n);
    default:
      VIDAX_CHECK(false, "not a 16/32-bit float dtype: ", dtype_name(src_dtype));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace vidax
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace vidax {
namespace {

float load_one(const void* src, DType t, size_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(src)[i];
    case DType::kBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::kF16:
      return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::kF8E4M3:
      return f8e4m3_to_f32(static_cast<const uint8_t*>(src)[i]);
    case DType::kF8E5M2:
      return f8e5m2_to_f32(static_cast<const uint8_t*>(src)[i]);
    default:
      VIDAX_CHECK(false, "not a float dtype");
  }
  return 0;
}

void store_one(void* dst, DType t, size_t i, float v) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(dst)[i] = v;
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v);
      break;
    case DType::kF16:
      static_cast<uint16_t*>(dst)[i] = f32_to_f16(v);
      break;
    default:
      VIDAX_CHECK(false, "cannot convert into ", dtype_name(t));
  }
}

// Every f8 value is exact in f32, bf16 and f16, so a 256-entry table per (source, destination)
// pair reproduces the reference bit for bit. Built once, on first use (thread-safe static).
struct F8Tables {
  std::array<float, 256> f32[2];
  std::array<uint16_t, 256> bf16[2];
  std::array<uint16_t, 256> f16[2];
  F8Tables() {
    for (int k = 0; k < 2; ++k) {
      for (int b = 0; b < 256; ++b) {
        const uint8_t byte = static_cast<uint8_t>(b);
        const float v = k == 0 ? f8e4m3_to_f32(byte) : f8e5m2_to_f32(byte);
        f32[k][static_cast<size_t>(b)] = v;
        bf16[k][static_cast<size_t>(b)] = f32_to_bf16(v);
        f16[k][static_cast<size_t>(b)] = f32_to_f16(v);
      }
    }
  }
};

template <typename T>
void lookup(const std::array<T, 256>& table, const uint8_t* src, T* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = table[src[i]];
}

void convert_f8(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n) {
  static const F8Tables tables;
  const int k = src_dtype == DType::kF8E4M3 ? 0 : 1;
  const auto* s = static_cast<const uint8_t*>(src);
  switch (dst_dtype) {
    case DType::kF32:
      return lookup(tables.f32[k], s, static_cast<float*>(dst), n);
    case DType::kBF16:
      return lookup(tables.bf16[k], s, static_cast<uint16_t*>(dst), n);
    case DType::kF16:
      return lookup(tables.f16[k], s, static_cast<uint16_t*>(dst), n);
    default:
      VIDAX_CHECK(false, "cannot convert into ", dtype_name(dst_dtype));
  }
}

bool is_f8(DType t) { return t == DType::kF8E4M3 || t == DType::kF8E5M2; }

}  // namespace

HWY_EXPORT(ConvertFloats16And32);
HWY_EXPORT(ConvertF8E4M3);

void convert_floats_reference(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                              size_t n) {
  for (size_t i = 0; i < n; ++i) store_one(dst, dst_dtype, i, load_one(src, src_dtype, i));
}

void convert_floats_serial(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n) {
  VIDAX_CHECK(is_float(src_dtype) && is_float(dst_dtype), "convert_floats ", dtype_name(src_dtype),
              " -> ", dtype_name(dst_dtype));
  VIDAX_CHECK(!is_f8(dst_dtype), "cannot convert into ", dtype_name(dst_dtype));
  if (n == 0) return;
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, n * dtype_size(src_dtype));
  } else if (src_dtype == DType::kF8E4M3) {
    HWY_DYNAMIC_DISPATCH(ConvertF8E4M3)(src, dst, dst_dtype, n);
  } else if (is_f8(src_dtype)) {
    convert_f8(src, src_dtype, dst, dst_dtype, n);
  } else {
    HWY_DYNAMIC_DISPATCH(ConvertFloats16And32)(src, src_dtype, dst, dst_dtype, n);
  }
}

void convert_floats(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n) {
  constexpr size_t kChunk = size_t{1} << 16;
  if (n <= kChunk || src_dtype == dst_dtype) {
    convert_floats_serial(src, src_dtype, dst, dst_dtype, n);  // checks the dtypes too
    return;
  }
  VIDAX_CHECK(is_float(src_dtype) && is_float(dst_dtype), "convert_floats ", dtype_name(src_dtype),
              " -> ", dtype_name(dst_dtype));
  // Large conversions (activations every layer, weights at load) are split over the OpenMP
  // pool; inside an existing parallel region this runs on the calling thread only.
  const size_t chunks = (n + kChunk - 1) / kChunk;
  const size_t src_size = dtype_size(src_dtype), dst_size = dtype_size(dst_dtype);
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t begin = c * kChunk, len = std::min(kChunk, n - begin);
    convert_floats_serial(static_cast<const std::byte*>(src) + begin * src_size, src_dtype,
                          static_cast<std::byte*>(dst) + begin * dst_size, dst_dtype, len);
  }
}

void convert_float_rows(const void* src, DType src_dtype, size_t src_stride, void* dst,
                        DType dst_dtype, size_t dst_stride, size_t rows, size_t cols) {
  const size_t src_size = dtype_size(src_dtype), dst_size = dtype_size(dst_dtype);
  // Rows split over the OpenMP pool (on the calling thread inside an existing region).
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; ++r)
    convert_floats_serial(static_cast<const std::byte*>(src) + r * src_stride * src_size, src_dtype,
                          static_cast<std::byte*>(dst) + r * dst_stride * dst_size, dst_dtype,
                          cols);
}

}  // namespace vidax
#endif  // HWY_ONCE
