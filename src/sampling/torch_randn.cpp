#include "sampling/torch_randn.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

// Bit parity: the AVX2 kernel we reproduce was compiled with FMA contraction, so every fused
// multiply-add below is an explicit std::fma and every other product must stay rounded on its
// own. Keep the compiler from contracting the remaining a * b + c on FMA-capable targets.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace vidax {
namespace {

float bits_to_float(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t float_to_bits(float f) { return std::bit_cast<uint32_t>(f); }

// at::uniform_real_distribution<float>(0, 1): the low 24 bits of one 32-bit draw, scaled.
float uniform_float(std::mt19937& gen) {
  return static_cast<float>(gen() & 0xFFFFFFu) * (1.0f / 16777216.0f);
}

// at::uniform_real_distribution<double>(0, 1): a 64-bit value from two draws (first draw in the
// high half), low 53 bits, scaled.
double uniform_double(std::mt19937& gen) {
  const uint64_t hi = gen();
  const uint64_t lo = gen();
  const uint64_t v = (hi << 32) | lo;
  return static_cast<double>(v & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Natural log by the Cephes single-precision algorithm (frexp-style split, degree-8 polynomial
// in the mantissa offset, log(2) split in two), operation for operation as ATen's AVX2 log256_ps
// after GCC contracted its multiply-adds. Only called with x in (0, 1].
float cephes_logf(float x) {
  const bool invalid = x <= 0.0f;
  x = std::max(x, bits_to_float(0x00800000u));  // flush denormals to the smallest normal
  const int32_t exponent_bits = static_cast<int32_t>(float_to_bits(x) >> 23);
  x = bits_to_float((float_to_bits(x) & ~0x7f800000u) |
                    float_to_bits(0.5f));  // mantissa in [0.5,1)
  float e = static_cast<float>(exponent_bits - 0x7f);
  e = e + 1.0f;
  const bool below_sqrt_half = x < 0.707106781186547524f;
  const float tmp = below_sqrt_half ? x : 0.0f;
  x = x - 1.0f;
  e = e - (below_sqrt_half ? 1.0f : 0.0f);
  x = x + tmp;
  const float z = x * x;
  float y = 7.0376836292E-2f;
  y = std::fma(y, x, -1.1514610310E-1f);
  y = std::fma(y, x, 1.1676998740E-1f);
  y = std::fma(y, x, -1.2420140846E-1f);
  y = std::fma(y, x, 1.4249322787E-1f);
  y = std::fma(y, x, -1.6668057665E-1f);
  y = std::fma(y, x, 2.0000714765E-1f);
  y = std::fma(y, x, -2.4999993993E-1f);
  y = std::fma(y, x, 3.3333331174E-1f);
  y = y * x;
  const float e_low = e * -2.12194440e-4f;
  y = std::fma(y, z, e_low);
  y = std::fma(-z, 0.5f, y);
  const float sum = x + y;
  float result = std::fma(e, 0.693359375f, sum);
  if (invalid) result = bits_to_float(0xffffffffu);  // NaN, as the all-ones mask makes it
  return result;
}

// sin and cos together by the Cephes algorithm (octant reduction with a three-part pi/4, one
// polynomial per octant kind), as ATen's AVX2 sincos256_ps after FMA contraction.
void cephes_sincosf(float x_in, float* sin_out, float* cos_out) {
  uint32_t sign_sin = float_to_bits(x_in) & 0x80000000u;
  float x = bits_to_float(float_to_bits(x_in) & 0x7fffffffu);
  float y = x * 1.27323954473516f;      // 4 / pi
  int32_t j = static_cast<int32_t>(y);  // truncation, as cvttps
  j = (j + 1) & ~1;
  y = static_cast<float>(j);
  const uint32_t swap_sign_sin = static_cast<uint32_t>(j & 4) << 29;
  const bool use_sin_poly = (j & 2) == 0;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const uint32_t sign_cos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  sign_sin ^= swap_sign_sin;

  const float z = x * x;
  float yc = 2.443315711809948E-005f;  // cosine polynomial
  yc = std::fma(yc, z, -1.388731625493765E-003f);
  yc = std::fma(yc, z, 4.166664568298827E-002f);
  yc = yc * z;
  const float half_z = z * 0.5f;
  yc = std::fma(yc, z, -half_z);
  yc = yc + 1.0f;
  float ys = -1.9515295891E-4f;  // sine polynomial
  ys = std::fma(ys, z, 8.3321608736E-3f);
  ys = std::fma(ys, z, -1.6666654611E-1f);
  ys = ys * z;
  ys = std::fma(ys, x, x);

  // Branch-free selection as in the vector code (the adds of +0 matter only for signed zeros).
  const float sin_part_s = use_sin_poly ? ys : 0.0f;
  const float sin_part_c = use_sin_poly ? 0.0f : yc;
  const float cos_s = ys - sin_part_s;
  const float cos_c = yc - sin_part_c;
  const float s = sin_part_c + sin_part_s;
  const float c = cos_c + cos_s;
  *sin_out = bits_to_float(float_to_bits(s) ^ sign_sin);
  *cos_out = bits_to_float(float_to_bits(c) ^ sign_cos);
}

// Box-Muller on one chunk of 16 uniforms: the first 8 give the radii, the last 8 the angles.
void normal_fill_16(float* data) {
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  float radius[8];
  float theta[8];
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j];  // [0, 1) -> (0, 1] for the log
    radius[j] = std::sqrt(-2.0f * cephes_logf(u1));
    theta[j] = two_pi * data[j + 8];
  }
  for (int j = 0; j < 8; ++j) {
    float s, c;
    cephes_sincosf(theta[j], &s, &c);
    // fmadd(n, std = 1, mean = 0) in the reference: exact, kept for the sign of zero.
    data[j] = radius[j] * c + 0.0f;
    data[j + 8] = radius[j] * s + 0.0f;
  }
}

void fill_vectorised(std::mt19937& gen, float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) data[i] = uniform_float(gen);
  const int64_t chunks = n / 16;
#pragma omp parallel for schedule(static) if (chunks >= 4096)
  for (int64_t c = 0; c < chunks; ++c) normal_fill_16(data + c * 16);
  if (n % 16 != 0) {
    float* tail = data + n - 16;  // overlaps the last full chunk on purpose
    for (int i = 0; i < 16; ++i) tail[i] = uniform_float(gen);
    normal_fill_16(tail);
  }
}

void fill_scalar(std::mt19937& gen, std::optional<double>& cached, float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (cached) {
      data[i] = static_cast<float>(*cached * 1.0 + 0.0);  // transformation::normal(x, 0, 1)
      cached.reset();
      continue;
    }
    const double u1 = uniform_double(gen);
    const double u2 = uniform_double(gen);
    const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
    const double theta = 2.0 * std::numbers::pi * u1;
    cached = r * std::sin(theta);
    data[i] = static_cast<float>(r * std::cos(theta) * 1.0 + 0.0);
  }
}

}  // namespace

TorchGenerator::TorchGenerator(uint64_t seed)
    // torch's mt19937 keeps only the low 32 bits of the seed (init_genrand).
    : gen_(static_cast<uint32_t>(seed & 0xffffffffu)) {}

void TorchGenerator::randn(float* data, int64_t n) {
  if (n <= 0) return;
  if (n >= 16) {
    fill_vectorised(gen_, data, n);
  } else {
    fill_scalar(gen_, cached_normal_, data, n);
  }
}

Tensor TorchGenerator::randn(const Shape& shape) {
  Tensor out = Tensor::zeros(shape, DType::kF32);
  randn(out.mutable_data<float>(), out.numel());
  return out;
}

void TorchGenerator::skip_randn(int64_t n) {
  if (n <= 0) return;
  if (n >= 16) {  // one draw per element, 16 more for a ragged tail
    gen_.discard(static_cast<unsigned long long>(n + (n % 16 != 0 ? 16 : 0)));
  } else {
    std::vector<float> scratch(static_cast<size_t>(n));
    fill_scalar(gen_, cached_normal_, scratch.data(), n);
  }
}

Tensor torch_randn(uint64_t seed, const Shape& shape) { return TorchGenerator(seed).randn(shape); }

}  // namespace vidax
