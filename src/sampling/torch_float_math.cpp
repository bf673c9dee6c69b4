#include "sampling/torch_float_math.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// Bit parity with the vector build: fused multiply-adds are explicit std::fma below; every other
// product must be rounded on its own, so the compiler may not contract a * b + c.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace vidax::sampling_detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kInvLn2 = 1.442695040888963407359924681001892137426645954152985934135449406931f;
// ln 2 split for Cody-Waite reduction: kLn2Hi has trailing zero bits so q * kLn2Hi is exact.
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.428606765330187045e-06f;

uint32_t to_bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// 2^q as a float built from its exponent field (q within the normal range).
float pow2i(int32_t q) { return from_bits((static_cast<uint32_t>(q) + 0x7fu) << 23); }

// d * 2^e in two factors so that intermediate powers stay representable.
float ldexp2(float d, int32_t e) {
  const int32_t half = e >> 1;  // arithmetic shift
  const float a = d * pow2i(half);
  return a * pow2i(e - half);
}

// Adds q to the exponent field of d (no range handling; callers keep it in range).
float ldexp3(float d, int32_t q) {
  return from_bits(to_bits(d) + (static_cast<uint32_t>(q) << 23));
}

// Unbiased exponent field of d.
int32_t ilogb2k(float d) { return static_cast<int32_t>((to_bits(d) >> 23) & 0xffu) - 0x7f; }

// Round to nearest, ties to even, as cvtps2dq under the default MXCSR.
int32_t round_to_int(float x) { return static_cast<int32_t>(std::nearbyint(x)); }

// Double-float: an unevaluated sum hi + lo carrying about 48 significant bits.
struct DF {
  float hi;
  float lo;
};

// --- additions (no FMA involved) ---

// x + y where |x| >= |y| is not required.
DF add2(float x, float y) {
  const float s = x + y;
  const float v = s - x;
  const float a = s - v;
  const float b = x - a;
  const float c = y - v;
  return {s, b + c};
}

// DF + float, requiring |x.hi| >= |y|.
DF add(DF x, float y) {
  const float s = x.hi + y;
  float t = x.hi - s;
  t = t + y;
  t = t + x.lo;
  return {s, t};
}

// DF + float, no magnitude requirement.
DF add2(DF x, float y) {
  const float s = x.hi + y;
  const float v = s - x.hi;
  const float a = s - v;
  const float b = x.hi - a;
  const float c = y - v;
  const float t = b + c;
  return {s, t + x.lo};
}

// float + DF, requiring |x| >= |y.hi|.
DF add(float x, DF y) {
  const float s = x + y.hi;
  float t = x - s;
  t = t + y.hi;
  t = t + y.lo;
  return {s, t};
}

// DF + DF, requiring |x.hi| >= |y.hi|.
DF add(DF x, DF y) {
  const float s = x.hi + y.hi;
  float t = x.hi - s;
  t = t + y.hi;
  t = t + x.lo;
  t = t + y.lo;
  return {s, t};
}

// DF + DF, no magnitude requirement.
DF add2(DF x, DF y) {
  const float s = x.hi + y.hi;
  const float v = s - x.hi;
  const float a = s - v;
  const float b = x.hi - a;
  const float c = y.hi - v;
  const float t = b + c;
  const float lo = x.lo + y.lo;
  return {s, t + lo};
}

DF scale(DF d, float s) {
  const float hi = d.hi * s;
  const float lo = d.lo * s;
  return {hi, lo};
}

// --- products and quotient (FMA recovers the rounding error of the leading product) ---

DF mul(DF x, float y) {
  const float s = x.hi * y;
  const float err = std::fma(x.hi, y, -s);
  return {s, std::fma(x.lo, y, err)};
}

DF mul(DF x, DF y) {
  const float s = x.hi * y.hi;
  const float err = std::fma(x.hi, y.hi, -s);
  const float a = std::fma(x.lo, y.hi, err);
  return {s, std::fma(x.hi, y.lo, a)};
}

DF square(DF x) {
  const float s = x.hi * x.hi;
  const float err = std::fma(x.hi, x.hi, -s);
  const float twice = x.hi + x.hi;
  return {s, std::fma(twice, x.lo, err)};
}

DF div(DF n, DF d) {
  const float t = 1.0f / d.hi;
  const float s = n.hi * t;
  const float u = std::fma(t, n.hi, -s);
  const float w = std::fma(-d.hi, t, 1.0f);
  const float v = std::fma(-d.lo, t, w);
  const float a = std::fma(n.lo, t, u);
  return {s, std::fma(s, v, a)};
}

// exp(d) as a double-float for |d| well inside the float range (callers handle the extremes).
DF exp_df(float a) {
  const float u = (a + 0.0f) * kInvLn2;
  const int32_t q = round_to_int(u);
  const float qf = static_cast<float>(q);
  DF s = add2(DF{a, 0.0f}, qf * -kLn2Hi);
  s = add2(s, qf * -kLn2Lo);

  float p = 0.1980960224e-3f;
  p = std::fma(p, s.hi, 0.1394256484e-2f);
  p = std::fma(p, s.hi, 0.8333456703e-2f);
  p = std::fma(p, s.hi, 0.4166637361e-1f);

  DF t = add2(mul(s, p), 0.166666659414234244790680580464e+0f);
  t = add2(mul(s, t), 0.5f);
  t = add2(s, mul(square(s), t));
  t = add(1.0f, t);
  return {ldexp2(t.hi, q), ldexp2(t.lo, q)};
}

}  // namespace

float torch_logf(float d) {
  const bool subnormal = d < std::numeric_limits<float>::min();
  if (subnormal) d = d * 18446744073709551616.0f;  // 2^64
  int32_t e = ilogb2k(d * (1.0f / 0.75f));         // mantissa m lands in [0.75, 1.5)
  const float m = ldexp3(d, -e);
  if (subnormal) e -= 64;

  const DF s0 = mul(DF{0.69314718246459960938f, -1.904654323148236017e-09f},
                    static_cast<float>(e));  // e * ln 2
  // log(m) = 2 atanh(x), x = (m - 1) / (m + 1).
  const DF x = div(add2(-1.0f, m), add2(1.0f, m));
  const float x2 = x.hi * x.hi;
  float t = 0.3027294874e+0f;
  t = std::fma(t, x2, 0.3996108174e+0f);
  t = std::fma(t, x2, 0.6666694880e+0f);

  DF s = add(s0, scale(x, 2.0f));
  const float x3 = x2 * x.hi;
  s = add(s, x3 * t);
  float r = s.hi + s.lo;

  if (std::isinf(d) && d > 0) r = kInf;
  if (d < 0 || std::isnan(d)) r = std::numeric_limits<float>::quiet_NaN();
  if (d == 0) r = -kInf;
  return r;
}

float torch_expf(float d) {
  if (std::isnan(d)) return d;
  if (d < -104.0f) return 0.0f;
  if (100.0f < d) return kInf;
  const int32_t q = round_to_int(d * kInvLn2);
  const float qf = static_cast<float>(q);
  float s = std::fma(qf, -kLn2Hi, d);
  s = std::fma(qf, -kLn2Lo, s);

  float u = 0.000198527617612853646278381f;
  u = std::fma(u, s, 0.00139304355252534151077271f);
  u = std::fma(u, s, 0.00833336077630519866943359f);
  u = std::fma(u, s, 0.0416664853692054748535156f);
  u = std::fma(u, s, 0.166666671633720397949219f);
  u = std::fma(u, s, 0.5f);
  const float s2 = s * s;
  u = 1.0f + std::fma(s2, u, s);
  return ldexp2(u, q);
}

float torch_expm1f(float a) {
  if (std::isnan(a)) return a;
  if (a < -16.635532333438687426013570f) return -1.0f;
  if (a > 88.72283172607421875f) return kInf;
  if (a == 0.0f && std::signbit(a)) return -0.0f;
  const DF d = add2(exp_df(a), -1.0f);
  return d.hi + d.lo;
}

}  // namespace vidax::sampling_detail
