// convert_floats (Highway, every compiled SIMD target) against the scalar reference, bit for bit.

#include "core/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::for_each_target;

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f32 bit patterns that exercise every special case of the narrowing conversions.
std::vector<uint32_t> special_f32_bits() {
  std::vector<uint32_t> v = {
      0x00000000u,
      0x80000000u,  // +-0
      0x7f800000u,
      0xff800000u,  // +-inf
      0x7fc00000u,
      0xffc00000u,
      0x7f800001u,
      0x7fbfffffu,  // quiet/signalling NaNs
      0x7fc12345u,
      0xff812345u,
      0x7fffffffu,  // NaN payloads
      0x00000001u,
      0x80000001u,
      0x007fffffu,
      0x00800000u,  // f32 subnormals, min normal
      0x3f800000u,
      0xbf800000u,  // +-1
      // bf16 rounding: exact ties (to even, down and up), just above/below a tie.
      0x3f808000u,
      0x3f818000u,
      0x3f808001u,
      0x3f807fffu,
      0xbf818000u,
      0x7f7fffffu,
      0xff7fffffu,
      0x7f7f8000u,  // max finite; rounds to inf in bf16
      // f16 rounding: ties at 1 + 2^-11 (down to even) and 1 + 3*2^-11 (up to even).
      0x3f801000u,
      0x3f803000u,
      0x3f801001u,
      0x3f800fffu,
      // f16 overflow: 65504 (max), 65519, 65520 (tie -> inf), 65536, 1e10.
      0x477fe000u,
      0x477fefffu,
      0x477ff000u,
      0x47800000u,
      0x501502f9u,
      0xc77ff000u,
      // f16 subnormal range: 2^-24, 2^-25 (tie to 0), 3*2^-25 (tie up), below 2^-14.
      0x33800000u,
      0x33000000u,
      0x33c00000u,
      0x387fffffu,
      0x387fe000u,
      0x387ff000u,
      0x38800000u,
      0x337fffffu,
      0x33000001u,
      0xb3c00000u,
      0x2f800000u,
  };
  return v;
}

// Source buffers of `n` elements of `dtype`: special values first, then random bit patterns
// and random normal values at assorted magnitudes.
std::vector<uint8_t> make_source(DType dtype, size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> out(n * dtype_size(dtype));
  const std::vector<uint32_t> specials = special_f32_bits();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-30, 20);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = gen();
    switch (dtype) {
      case DType::kF32: {
        uint32_t bits;
        if (i < specials.size()) {
          bits = specials[i];
        } else if (i % 3 == 0) {
          bits = r;  // any pattern, NaN payloads included
        } else {
          bits = f32_bits(std::ldexp(normal(gen), expo(gen)));
        }
        std::memcpy(&out[i * 4], &bits, 4);
        break;
      }
      case DType::kBF16:
      case DType::kF16: {
        const uint16_t h =
            i < 8 ? static_cast<uint16_t>(0x7c00u + i * 0x1001u) : static_cast<uint16_t>(r);
        std::memcpy(&out[i * 2], &h, 2);
        break;
      }
      default:
        out[i] = static_cast<uint8_t>(i < 256 ? i : r);
        break;
    }
  }
  return out;
}

std::string first_difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                             size_t elem) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      const size_t e = i / elem;
      uint32_t g = 0, w = 0;
      std::memcpy(&g, &got[e * elem], elem);
      std::memcpy(&w, &want[e * elem], elem);
      std::ostringstream os;
      os << "element " << e << ": got 0x" << std::hex << g << " want 0x" << w;
      return os.str();
    }
  }
  return "";
}

const DType kSources[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E5M2};
const DType kDestinations[] = {DType::kF32, DType::kBF16, DType::kF16};

TEST(ConvertFloats, AllPairsMatchReferenceOnRaggedLengths) {
  for_each_target([] {
    for (DType src : kSources) {
      for (DType dst : kDestinations) {
        for (size_t n : {0, 1, 15, 17, 63, 1000, 4099}) {
          SCOPED_TRACE(std::string(dtype_name(src)) + " -> " + std::string(dtype_name(dst)) +
                       " n=" + std::to_string(n));
          const std::vector<uint8_t> in = make_source(src, n, static_cast<uint32_t>(n) + 7);
          // Guard bytes after the end catch stores past n.
          std::vector<uint8_t> got(n * dtype_size(dst) + 64, 0xab);
          std::vector<uint8_t> want(n * dtype_size(dst) + 64, 0xab);
          convert_floats(in.data(), src, got.data(), dst, n);
          if (src == dst) {  // a plain copy: NaN payloads are kept, not canonicalised
            std::copy(in.begin(), in.end(), want.begin());
          } else {
            convert_floats_reference(in.data(), src, want.data(), dst, n);
          }
          EXPECT_EQ(got, want) << first_difference(got, want, dtype_size(dst));
          std::vector<uint8_t> serial(got.size(), 0xab);
          convert_floats_serial(in.data(), src, serial.data(), dst, n);
          EXPECT_EQ(serial, want) << "serial: " << first_difference(serial, want, dtype_size(dst));
        }
      }
    }
  });
}

TEST(ConvertFloats, Exhaustive16BitSources) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for_each_target([&] {
    for (DType src : {DType::kBF16, DType::kF16}) {
      for (DType dst : kDestinations) {
        SCOPED_TRACE(std::string(dtype_name(src)) + " -> " + std::string(dtype_name(dst)));
        std::vector<uint8_t> got(all.size() * dtype_size(dst)), want(got.size());
        convert_floats(all.data(), src, got.data(), dst, all.size());
        if (src == dst) {
          std::memcpy(want.data(), all.data(), want.size());
        } else {
          convert_floats_reference(all.data(), src, want.data(), dst, all.size());
        }
        EXPECT_EQ(got, want) << first_difference(got, want, dtype_size(dst));
      }
    }
  });
}

TEST(ConvertFloats, F32SweepOfBitPatterns) {
  // Every 251st f32 bit pattern: all exponents, signs, NaN payloads and subnormals.
  std::vector<uint32_t> bits;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 251) bits.push_back(static_cast<uint32_t>(u));
  for_each_target([&] {
    for (DType dst : {DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(std::string(dtype_name(dst)));
      std::vector<uint16_t> got(bits.size()), want(bits.size());
      convert_floats(bits.data(), DType::kF32, got.data(), dst, bits.size());
      convert_floats_reference(bits.data(), DType::kF32, want.data(), dst, bits.size());
      size_t bad = 0;
      for (size_t i = 0; i < bits.size(); ++i) {
        if (got[i] != want[i] && bad++ < 5) {
          ADD_FAILURE() << "f32 0x" << std::hex << bits[i] << ": got 0x" << got[i] << " want 0x"
                        << want[i];
        }
      }
      EXPECT_EQ(bad, 0u);
    }
  });
}

template <typename Dst, typename Src>
Dst convert_one(Src v, DType src, DType dst) {
  Dst out{};
  convert_floats(&v, src, &out, dst, 1);
  return out;
}

TEST(ConvertFloats, KnownBitPatterns) {
  // bf16
  EXPECT_EQ(convert_one<float>(uint16_t{0x3f80}, DType::kBF16, DType::kF32), 1.0f);
  EXPECT_EQ(convert_one<float>(uint16_t{0xc040}, DType::kBF16, DType::kF32), -3.0f);
  EXPECT_EQ(convert_one<uint16_t>(1.0f, DType::kF32, DType::kBF16), 0x3f80);
  EXPECT_EQ(convert_one<uint16_t>(bits_f32(0x3f808000u), DType::kF32, DType::kBF16), 0x3f80);
  EXPECT_EQ(convert_one<uint16_t>(bits_f32(0x3f818000u), DType::kF32, DType::kBF16), 0x3f82);
  EXPECT_EQ(convert_one<uint16_t>(bits_f32(0x3f808001u), DType::kF32, DType::kBF16), 0x3f81);
  EXPECT_EQ(convert_one<uint16_t>(bits_f32(0x7f7fffffu), DType::kF32, DType::kBF16), 0x7f80);
  const uint16_t bf_nan = convert_one<uint16_t>(bits_f32(0x7f800001u), DType::kF32, DType::kBF16);
  EXPECT_EQ(bf_nan & 0x7f80, 0x7f80);  // NaN stays NaN (not inf)
  EXPECT_NE(bf_nan & 0x007f, 0);
  // f16
  EXPECT_EQ(convert_one<float>(uint16_t{0x3c00}, DType::kF16, DType::kF32), 1.0f);
  EXPECT_EQ(convert_one<float>(uint16_t{0x7bff}, DType::kF16, DType::kF32), 65504.0f);
  EXPECT_EQ(convert_one<float>(uint16_t{0x0001}, DType::kF16, DType::kF32), std::ldexp(1.0f, -24));
  EXPECT_EQ(convert_one<float>(uint16_t{0xfc00}, DType::kF16, DType::kF32), -INFINITY);
  EXPECT_TRUE(std::isnan(convert_one<float>(uint16_t{0x7c01}, DType::kF16, DType::kF32)));
  EXPECT_EQ(convert_one<uint16_t>(65504.0f, DType::kF32, DType::kF16), 0x7bff);
  EXPECT_EQ(convert_one<uint16_t>(65519.0f, DType::kF32, DType::kF16), 0x7bff);
  EXPECT_EQ(convert_one<uint16_t>(65520.0f, DType::kF32, DType::kF16), 0x7c00);
  EXPECT_EQ(convert_one<uint16_t>(-1e10f, DType::kF32, DType::kF16), 0xfc00);
  EXPECT_EQ(convert_one<uint16_t>(std::ldexp(1.0f, -25), DType::kF32, DType::kF16), 0x0000);
  EXPECT_EQ(convert_one<uint16_t>(std::ldexp(3.0f, -25), DType::kF32, DType::kF16), 0x0002);
  EXPECT_EQ(convert_one<uint16_t>(bits_f32(0x387fffffu), DType::kF32, DType::kF16), 0x0400);
  EXPECT_EQ(convert_one<uint16_t>(NAN, DType::kF32, DType::kF16), 0x7e00);
  // bf16 <-> f16 through f32
  EXPECT_EQ(convert_one<uint16_t>(uint16_t{0x3f80}, DType::kBF16, DType::kF16), 0x3c00);
  EXPECT_EQ(convert_one<uint16_t>(uint16_t{0x3c00}, DType::kF16, DType::kBF16), 0x3f80);
  EXPECT_EQ(convert_one<uint16_t>(uint16_t{0x4780}, DType::kBF16, DType::kF16), 0x7c00);  // 65536
  // f8 e4m3 ("fn": no infinities)
  EXPECT_EQ(convert_one<float>(uint8_t{0x7e}, DType::kF8E4M3, DType::kF32), 448.0f);
  EXPECT_EQ(convert_one<float>(uint8_t{0xfe}, DType::kF8E4M3, DType::kF32), -448.0f);
  EXPECT_EQ(convert_one<float>(uint8_t{0x38}, DType::kF8E4M3, DType::kF32), 1.0f);
  EXPECT_EQ(convert_one<float>(uint8_t{0x01}, DType::kF8E4M3, DType::kF32), std::ldexp(1.0f, -9));
  EXPECT_EQ(convert_one<float>(uint8_t{0x80}, DType::kF8E4M3, DType::kF32), 0.0f);
  EXPECT_TRUE(std::signbit(convert_one<float>(uint8_t{0x80}, DType::kF8E4M3, DType::kF32)));
  EXPECT_TRUE(std::isnan(convert_one<float>(uint8_t{0x7f}, DType::kF8E4M3, DType::kF32)));
  EXPECT_TRUE(std::isnan(convert_one<float>(uint8_t{0xff}, DType::kF8E4M3, DType::kF32)));
  EXPECT_EQ(convert_one<uint16_t>(uint8_t{0x7e}, DType::kF8E4M3, DType::kBF16), 0x43e0);  // 448
  // f8 e5m2 (the top byte of an f16)
  EXPECT_EQ(convert_one<float>(uint8_t{0x3c}, DType::kF8E5M2, DType::kF32), 1.0f);
  EXPECT_EQ(convert_one<float>(uint8_t{0x7b}, DType::kF8E5M2, DType::kF32), 57344.0f);
  EXPECT_EQ(convert_one<float>(uint8_t{0x7c}, DType::kF8E5M2, DType::kF32), INFINITY);
  EXPECT_EQ(convert_one<float>(uint8_t{0x01}, DType::kF8E5M2, DType::kF32), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isnan(convert_one<float>(uint8_t{0x7d}, DType::kF8E5M2, DType::kF32)));
  EXPECT_EQ(convert_one<uint16_t>(uint8_t{0x3c}, DType::kF8E5M2, DType::kF16), 0x3c00);
}

TEST(ConvertFloats, RoundTripsThroughWiderTypesAreExact) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<float> f(all.size());
    std::vector<uint16_t> back(all.size());
    convert_floats(all.data(), t, f.data(), DType::kF32, all.size());
    convert_floats(f.data(), DType::kF32, back.data(), t, all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      if (std::isnan(f[i])) continue;  // NaN payloads are canonicalised on the way back
      ASSERT_EQ(back[i], all[i]) << dtype_name(t) << " pattern " << i;
    }
  }
}

TEST(ConvertFloats, SameTypeIsACopy) {
  const std::vector<uint8_t> in = make_source(DType::kF32, 100, 3);
  std::vector<uint8_t> out(in.size());
  convert_floats(in.data(), DType::kF32, out.data(), DType::kF32, 100);
  EXPECT_EQ(in, out);
}

// Strided rows (a slice of a wider buffer) into a differently strided destination: each row as
// the reference converts it, the gaps of the destination untouched.
TEST(ConvertFloats, StridedRowsMatchReferenceAndLeaveGaps) {
  const size_t rows = 37, cols = 45, src_stride = 3 * cols + 1, dst_stride = cols + 7;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> src(rows * src_stride);
  for (auto& x : src) x = nd(rng);
  std::vector<uint16_t> dst(rows * dst_stride, 0xabcd);
  convert_float_rows(src.data() + cols, DType::kF32, src_stride, dst.data(), DType::kBF16,
                     dst_stride, rows, cols);
  for (size_t r = 0; r < rows; ++r) {
    std::vector<uint16_t> want(cols);
    convert_floats_reference(src.data() + r * src_stride + cols, DType::kF32, want.data(),
                             DType::kBF16, cols);
    for (size_t c = 0; c < dst_stride; ++c)
      ASSERT_EQ(dst[r * dst_stride + c], c < cols ? want[c] : 0xabcd) << r << "," << c;
  }
}

TEST(ConvertFloatsDeathTest, F8DestinationIsAnInternalError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float one = 1.0f;
  uint8_t out = 0;
  EXPECT_DEATH(convert_floats(&one, DType::kF32, &out, DType::kF8E4M3, 1), "cannot convert");
}

}  // namespace
}  // namespace vidax

namespace vidax {
namespace {

// f32 -> e4m3fn: every finite code round-trips; a value between two neighbours goes to the
// nearer (ties to the even code); beyond 448 saturates; NaN is 0x7f.
TEST(Fp8Quantize, NearestE4M3) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float v = f8e4m3_to_f32(code);
    const uint8_t back = f32_to_f8e4m3(v);
    // -0 and +0 are both zero.
    EXPECT_EQ(f8e4m3_to_f32(back), v) << c;
    if ((c & 0x7f) < 126) {
      const float next = f8e4m3_to_f32(static_cast<uint8_t>(c + 1));
      const float mid = 0.5f * (v + next);
      EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(v + 0.25f * (next - v))), v) << c;
      EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(v + 0.75f * (next - v))), next) << c;
      const uint8_t tie = f32_to_f8e4m3(mid);
      EXPECT_EQ(tie & 1, 0) << "tie at code " << c << " went to " << int(tie);
    }
  }
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1e6f)), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(-1e6f)), -448.0f);
  EXPECT_EQ(f32_to_f8e4m3(std::nanf("")), 0x7f);
}

}  // namespace
}  // namespace vidax
