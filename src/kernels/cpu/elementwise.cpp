// Highway implementations of the element-wise and normalisation kernels (one copy per SIMD
// target, chosen at run time), plus the OpenMP row splitting around them.
//
// Transcendentals are our own: polynomial coefficients were fitted for this file (Chebyshev
// fits in extended precision, then rounded to f32) and the error bounds measured against
// double-precision libm; see docs/kernels.md. Where an argument is itself the result of a
// rounding that the function amplifies (exp(-x^2) in erfc, exp(-2u) in GELU-tanh) it is carried
// as an unevaluated sum hi + lo, so large |x| keeps its relative accuracy.

#include "kernels/cpu/elementwise.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "core/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace vidax {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;
using VF = hn::Vec<DF>;

constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// ---------------------------------------------------------------------------------------------
// Vector math

// c[0] * x^(K-1) + ... + c[K-1]
template <size_t K>
HWY_INLINE VF Horner(VF x, const float (&c)[K]) {
  const DF d;
  VF r = hn::Set(d, c[0]);
  for (size_t i = 1; i < K; ++i) r = hn::MulAdd(r, x, hn::Set(d, c[i]));
  return r;
}

// The exact rounding error of p = a * b, i.e. a * b - p.
HWY_INLINE VF ProductError(VF a, VF b, VF p) {
#if HWY_NATIVE_FMA
  return hn::MulSub(a, b, p);
#else
  // Veltkamp/Dekker splitting for targets without FMA.
  const DF d;
  const VF k = hn::Set(d, 4097.0f);
  const VF ta = hn::Mul(a, k);
  const VF a_hi = hn::Sub(ta, hn::Sub(ta, a));
  const VF a_lo = hn::Sub(a, a_hi);
  const VF tb = hn::Mul(b, k);
  const VF b_hi = hn::Sub(tb, hn::Sub(tb, b));
  const VF b_lo = hn::Sub(b, b_hi);
  VF e = hn::Sub(hn::Mul(a_hi, b_hi), p);
  e = hn::Add(e, hn::Mul(a_hi, b_lo));
  e = hn::Add(e, hn::Mul(a_lo, b_hi));
  return hn::Add(e, hn::Mul(a_lo, b_lo));
#endif
}

// exp(r) - 1 - r = r^2 * P(r) on |r| <= 0.35.
constexpr float kExpPoly[] = {0.00139269186f, 0.0083637666f, 0.0416665487f, 0.166665733f, 0.5f};

// exp(hi + lo) * 2^kPow2 for |lo| <= ulp(hi); within ~1.1 ulp. Overflows to inf, underflows
// through the subnormals to 0; NaN in hi propagates. kPow2 > 0 lets callers form products with
// exp(hi) that are normal numbers although exp(hi) alone would be subnormal.
template <int kPow2 = 0>
HWY_INLINE VF ExpSum(VF hi, VF lo) {
  const DF d;
  const DI di;
  constexpr float kShift = 0.693147181f * kPow2;
  const VF x = hn::Min(hn::Max(hi, hn::Set(d, -104.0f - kShift)), hn::Set(d, 88.8f - kShift));
  const VF n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504f)));
  // Cody-Waite: ln2_hi has 15 significant bits, so n * ln2_hi is exact even without FMA.
  VF r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187e-06f), r);
  r = hn::Add(r, lo);
  const VF p = hn::Add(hn::MulAdd(hn::Mul(r, r), Horner(r, kExpPoly), r), hn::Set(d, 1.0f));
  // 2^n as two factors so that results in the subnormal range are rounded only once.
  const auto ni = hn::Add(hn::ConvertTo(di, n), hn::Set(di, kPow2));
  const auto n1 = hn::ShiftRight<1>(ni);
  const auto n2 = hn::Sub(ni, n1);
  const auto bias = hn::Set(di, 127);
  const VF s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n1, bias)));
  const VF s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n2, bias)));
  return hn::IfThenElse(hn::IsNaN(hi), hi, hn::Mul(hn::Mul(p, s1), s2));
}

// x * sigmoid(t) for the exponent e_up = exp(-|t|) * 2^64 (sign of t given by `negative`):
// x / (1 + e) for t >= 0 and x e / (1 + e) for t < 0. Nothing overflows, and a product with a
// subnormal e is formed at the 2^64 scale, so it keeps full precision.
HWY_INLINE VF TimesSigmoid(VF x, VF e_up, hn::Mask<DF> negative) {
  const DF d;
  const VF down = hn::Set(d, 5.42101086e-20f);  // 2^-64
  const VF den = hn::MulAdd(e_up, down, hn::Set(d, 1.0f));
  const VF pos = hn::Div(x, den);
  const VF neg = hn::Mul(hn::Div(hn::Mul(x, e_up), den), down);
  return hn::IfThenElse(negative, neg, pos);
}

HWY_INLINE VF Exp(VF x) { return ExpSum(x, hn::Zero(DF())); }

// (tanh(x) - x) / x^3 as a polynomial in s = x^2 on [0, 0.81].
constexpr float kTanhPoly[] = {-0.000520352682f, 0.00275911926f, -0.00845087226f, 0.0217594095f,
                               -0.0539538898f,   0.133332625f,   -0.333333313f};

HWY_INLINE VF Tanh(VF x) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  const VF a = hn::Abs(x);
  const VF s = hn::Mul(a, a);
  const VF small = hn::MulAdd(hn::Mul(a, s), Horner(s, kTanhPoly), a);
  // 1 - 2 / (e^{2a} + 1): no cancellation above 0.9; e = inf gives exactly 1.
  const VF e = Exp(hn::Add(a, a));
  const VF big = hn::Sub(one, hn::Div(hn::Set(d, 2.0f), hn::Add(e, one)));
  return hn::CopySign(hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.9f)), small, big), x);
}

// erf(x) / x as a polynomial in s = x^2 on [0, 0.25].
constexpr float kErfPoly[] = {-0.000769453414f, 0.00520041352f, -0.0268631428f,
                              0.112837739f,     -0.376126379f,  1.12837923f};
// erfc(z) * exp(z^2) as a polynomial in t = 3 / (3 + z), fitted for z in [0.5, 10.1].
constexpr float kErfcPoly[] = {0.0642526895f, -0.339910328f,  0.653459191f,   -0.609313726f,
                               0.557394028f,  -0.0961278901f, 0.231175423f,   0.160626754f,
                               0.190593973f,  0.18784146f,    8.65812308e-06f};

// erfc(z) for z >= 0.5, with z^2 = z2_hi + z2_lo given exactly by the caller. Callers clamp z
// to a finite range (erfc underflows to 0 beyond z ~ 10.05).
HWY_INLINE VF ErfcCore(VF z, VF z2_hi, VF z2_lo) {
  const DF d;
  const VF k3 = hn::Set(d, 3.0f);
  // t = 3 / (3 + z) as t0 + t_lo: the rounding of 3 + z and of the division would otherwise
  // be amplified ~2.5x by the polynomial.
  const VF s = hn::Add(k3, z);
  const VF bb = hn::Sub(s, k3);
  const VF s_err = hn::Add(hn::Sub(k3, hn::Sub(s, bb)), hn::Sub(z, bb));  // 3 + z = s + s_err
  const VF t0 = hn::Div(k3, s);
#if HWY_NATIVE_FMA
  const VF rem = hn::NegMulAdd(t0, s, k3);  // 3 - t0 * s, exact
#else
  const VF p = hn::Mul(t0, s);
  const VF rem = hn::Sub(hn::Sub(k3, p), ProductError(t0, s, p));
#endif
  const VF t_lo = hn::Mul(hn::NegMulAdd(t0, s_err, rem), hn::Mul(t0, hn::Set(d, 1.0f / 3.0f)));
  // Horner for the polynomial and its derivative; R(t0 + t_lo) ~ R(t0) + R'(t0) t_lo.
  VF r = hn::Set(d, kErfcPoly[0]);
  VF dr = hn::Zero(d);
  for (size_t i = 1; i < sizeof(kErfcPoly) / sizeof(float); ++i) {
    dr = hn::MulAdd(dr, t0, r);
    r = hn::MulAdd(r, t0, hn::Set(d, kErfcPoly[i]));
  }
  r = hn::MulAdd(dr, t_lo, r);
  return hn::Mul(ExpSum(hn::Neg(z2_hi), hn::Neg(z2_lo)), r);
}

HWY_INLINE VF Erf(VF x) {
  const DF d;
  const VF a = hn::Abs(x);
  const VF s = hn::Mul(a, a);
  const VF small = hn::Mul(a, Horner(s, kErfPoly));
  const VF z = hn::Min(hn::Max(a, hn::Set(d, 0.5f)), hn::Set(d, 4.0f));  // erf(4) == 1 in f32
  const VF z2 = hn::Mul(z, z);
  const VF big = hn::Sub(hn::Set(d, 1.0f), ErfcCore(z, z2, ProductError(z, z, z2)));
  const VF r = hn::CopySign(hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.5f)), small, big), x);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

// 0.5 x (1 + erf(x / sqrt 2)); for x < 0 the bracket is erfc(|x| / sqrt 2), computed directly.
HWY_INLINE VF GeluErf(VF x) {
  const DF d;
  const VF xc = hn::Min(hn::Max(x, hn::Set(d, -15.0f)), hn::Set(d, 15.0f));
  const VF z = hn::Mul(xc, hn::Set(d, 0.707106781f));
  const VF a = hn::Abs(z);
  const VF w_small = hn::MulAdd(z, Horner(hn::Mul(z, z), kErfPoly), hn::Set(d, 1.0f));
  // z^2 = x^2 / 2 exactly: x^2 = hi + lo, then halve both.
  const VF half = hn::Set(d, 0.5f);
  const VF x2 = hn::Mul(xc, xc);
  const VF z2_hi = hn::Mul(x2, half);
  const VF z2_lo = hn::Mul(ProductError(xc, xc, x2), half);
  const VF e = ErfcCore(hn::Max(a, half), z2_hi, z2_lo);
  const VF w_big = hn::IfThenElse(hn::Gt(x, hn::Zero(d)), hn::Sub(hn::Set(d, 2.0f), e), e);
  const VF w = hn::IfThenElse(hn::Lt(a, half), w_small, w_big);
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Mul(hn::Mul(half, x), w));
}

// 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = b (x + k x^3) = b x (1 + k x^2), with u carried
// as hi + lo so exp(-2u) keeps its relative accuracy when u is large.
HWY_INLINE VF GeluTanh(VF x) {
  const DF d;
  const VF kb = hn::Set(d, 0.797884561f);  // float(sqrt(2 / pi)), as PyTorch
  const VF kk = hn::Set(d, 0.044715f);
  const VF one = hn::Set(d, 1.0f);
  const VF xc = hn::Min(hn::Max(x, hn::Set(d, -20.0f)), hn::Set(d, 20.0f));
  const VF s = hn::Mul(xc, xc);
  const VF s_lo = ProductError(xc, xc, s);
  const VF q = hn::Mul(kk, s);
  const VF q_lo = hn::MulAdd(kk, s_lo, ProductError(kk, s, q));  // k x^2 = q + q_lo
  const VF w = hn::Add(one, q);
  const VF bb = hn::Sub(w, one);
  const VF w_lo = hn::Add(hn::Add(hn::Sub(one, hn::Sub(w, bb)), hn::Sub(q, bb)), q_lo);
  const VF m = hn::Mul(kb, xc);
  const VF m_lo = ProductError(kb, xc, m);  // b x = m + m_lo
  const VF v = hn::Mul(m, w);
  const VF v_lo =
      hn::Add(ProductError(m, w, v), hn::MulAdd(m, w_lo, hn::Mul(m_lo, w)));  // u = v + v_lo
  const auto negative = hn::Lt(v, hn::Zero(d));
  const VF two_lo = hn::Add(v_lo, v_lo);  // -2|u| = -2|v| + (v < 0 ? 2 v_lo : -2 v_lo)
  const VF e_up = ExpSum<64>(hn::Mul(hn::Set(d, -2.0f), hn::Abs(v)),
                             hn::IfThenElse(negative, two_lo, hn::Neg(two_lo)));
  return TimesSigmoid(x, e_up, negative);
}

HWY_INLINE VF Silu(VF x) {
  const DF d;
  const VF e_up = ExpSum<64>(hn::Neg(hn::Abs(x)), hn::Zero(d));
  return TimesSigmoid(x, e_up, hn::Lt(x, hn::Zero(d)));
}

// f32 -> bf16 bits (round to nearest even, NaN kept quiet) in the low half of u32 lanes.
HWY_INLINE void StoreBF16(VF v, uint16_t* p) {
  const DU du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb));
  const auto quiet_nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
  const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
  hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(DI(), bits)), DU16(), p);
}

// ---------------------------------------------------------------------------------------------
// Row traversal. A body sees either whole vectors (FullChunk) or the ragged end of a row
// (TailChunk, through zero-padded buffers), with the same arithmetic in both.

struct FullChunk {
  size_t i;
  VF load(const float* p) const { return hn::LoadU(DF(), p + i); }
  void store(VF v, float* p) const { hn::StoreU(v, DF(), p + i); }
  void store(VF v, BFloat16* p) const { StoreBF16(v, reinterpret_cast<uint16_t*>(p) + i); }
};

struct TailChunk {
  size_t i, rest;
  VF load(const float* p) const {
    HWY_ALIGN float buf[kMaxLanes] = {};
    std::memcpy(buf, p + i, rest * sizeof(float));
    return hn::Load(DF(), buf);
  }
  void store(VF v, float* p) const {
    HWY_ALIGN float buf[kMaxLanes];
    hn::Store(v, DF(), buf);
    std::memcpy(p + i, buf, rest * sizeof(float));
  }
  void store(VF v, BFloat16* p) const {
    uint16_t buf[kMaxLanes];
    StoreBF16(v, buf);
    std::memcpy(reinterpret_cast<uint16_t*>(p) + i, buf, rest * sizeof(uint16_t));
  }
};

template <class Body>
HWY_INLINE void ForEachChunk(size_t n, const Body& body) {
  const size_t lanes = hn::Lanes(DF());
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) body(FullChunk{i});
  if (i < n) body(TailChunk{i, n - i});
}

template <class Fn>
HWY_INLINE void MapUnary(const float* x, float* y, size_t n, const Fn& fn) {
  ForEachChunk(n, [&](const auto& c) { c.store(fn(c.load(x)), y); });
}

// Sum of x[0, n) with four independent accumulators (latency and accuracy).
HWY_INLINE float Sum(const float* x, size_t n) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    a0 = hn::Add(a0, hn::LoadU(d, x + i));
    a1 = hn::Add(a1, hn::LoadU(d, x + i + lanes));
    a2 = hn::Add(a2, hn::LoadU(d, x + i + 2 * lanes));
    a3 = hn::Add(a3, hn::LoadU(d, x + i + 3 * lanes));
  }
  for (; i + lanes <= n; i += lanes) a0 = hn::Add(a0, hn::LoadU(d, x + i));
  if (i < n) a1 = hn::Add(a1, TailChunk{i, n - i}.load(x));
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// Sums of (x - c) and (x - c)^2 over x[0, n).
HWY_INLINE void CenteredSums(const float* x, size_t n, float c, float& sum, float& sum_sq) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  const VF vc = hn::Set(d, c);
  VF s0 = hn::Zero(d), s1 = s0, q0 = s0, q1 = s0;
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const VF d0 = hn::Sub(hn::LoadU(d, x + i), vc);
    const VF d1 = hn::Sub(hn::LoadU(d, x + i + lanes), vc);
    s0 = hn::Add(s0, d0);
    s1 = hn::Add(s1, d1);
    q0 = hn::MulAdd(d0, d0, q0);
    q1 = hn::MulAdd(d1, d1, q1);
  }
  for (; i < n; i += lanes) {
    const size_t rest = std::min(lanes, n - i);
    const VF v = rest == lanes ? hn::LoadU(d, x + i) : TailChunk{i, rest}.load(x);
    const VF dv = hn::IfThenElseZero(hn::FirstN(d, rest), hn::Sub(v, vc));
    s0 = hn::Add(s0, dv);
    q0 = hn::MulAdd(dv, dv, q0);
  }
  sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  sum_sq = hn::GetLane(hn::SumOfLanes(d, hn::Add(q0, q1)));
}

// LayerNorm statistics: a first-pass mean, then the corrected two-pass variance (the residual
// sum of deviations also refines the mean).
HWY_INLINE void MeanAndRstd(const float* x, size_t n, float eps, float& mean, float& rstd) {
  const float inv_n = 1.0f / static_cast<float>(n);
  const float m0 = Sum(x, n) * inv_n;
  float dev, dev_sq;
  CenteredSums(x, n, m0, dev, dev_sq);
  const float dm = dev * inv_n;
  mean = m0 + dm;
  const float var = std::max(dev_sq * inv_n - dm * dm, 0.0f);
  rstd = 1.0f / std::sqrt(var + eps);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Exported per-target entry points; each handles rows [r0, r1) or one flat range.

void LayerNormRows(const float* x, float* y, int64_t r0, int64_t r1, int64_t dim,
                   const float* weight, const float* bias, float eps) {
  const DF d;
  const size_t n = static_cast<size_t>(dim);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    float mean, rstd;
    MeanAndRstd(xr, n, eps, mean, rstd);
    const VF vm = hn::Set(d, mean), vr = hn::Set(d, rstd);
    ForEachChunk(n, [&](const auto& c) {
      VF v = hn::Mul(hn::Sub(c.load(xr), vm), vr);
      if (weight != nullptr) v = hn::Mul(v, c.load(weight));
      if (bias != nullptr) v = hn::Add(v, c.load(bias));
      c.store(v, yr);
    });
  }
}

template <typename Out>
HWY_INLINE void LayerNormModulateRowsT(const float* x, Out* y, int64_t r0, int64_t r1, int64_t dim,
                                       const float* shift, const float* scale,
                                       int64_t mod_row_stride, float eps) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  const size_t n = static_cast<size_t>(dim);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * dim;
    Out* yr = y + r * dim;
    const float* sh = shift + r * mod_row_stride;
    const float* sc = scale + r * mod_row_stride;
    float mean, rstd;
    MeanAndRstd(xr, n, eps, mean, rstd);
    const VF vm = hn::Set(d, mean), vr = hn::Set(d, rstd);
    ForEachChunk(n, [&](const auto& c) {
      // Wan's `norm(x) * (1 + scale) + shift` (the compiler may fuse the multiply-add).
      const VF v = hn::Mul(hn::Sub(c.load(xr), vm), vr);
      c.store(hn::Add(hn::Mul(v, hn::Add(one, c.load(sc))), c.load(sh)), yr);
    });
  }
}

void LayerNormModulateRows(const float* x, float* y, int64_t r0, int64_t r1, int64_t dim,
                           const float* shift, const float* scale, int64_t mod_row_stride,
                           float eps) {
  LayerNormModulateRowsT(x, y, r0, r1, dim, shift, scale, mod_row_stride, eps);
}

void LayerNormModulateRowsBF16(const float* x, BFloat16* y, int64_t r0, int64_t r1, int64_t dim,
                               const float* shift, const float* scale, int64_t mod_row_stride,
                               float eps) {
  LayerNormModulateRowsT(x, y, r0, r1, dim, shift, scale, mod_row_stride, eps);
}

void RmsNormRows(const float* x, float* y, int64_t r0, int64_t r1, int64_t dim, const float* weight,
                 float eps) {
  const DF d;
  const size_t n = static_cast<size_t>(dim);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    float sum, sum_sq;
    CenteredSums(xr, n, 0.0f, sum, sum_sq);
    const VF vr = hn::Set(d, 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps));
    ForEachChunk(n, [&](const auto& c) {
      VF v = hn::Mul(c.load(xr), vr);
      if (weight != nullptr) v = hn::Mul(v, c.load(weight));
      c.store(v, yr);
    });
  }
}

void GatedResidualAddRows(float* x, const float* y, const float* gate, int64_t r0, int64_t r1,
                          int64_t dim, int64_t gate_row_stride) {
  for (int64_t r = r0; r < r1; ++r) {
    float* xr = x + r * dim;
    const float* yr = y + r * dim;
    const float* gr = gate + r * gate_row_stride;
    ForEachChunk(static_cast<size_t>(dim), [&](const auto& c) {
      c.store(hn::Add(c.load(xr), hn::Mul(c.load(yr), c.load(gr))), xr);
    });
  }
}

void AddRange(float* x, const float* y, size_t n) {
  ForEachChunk(n, [&](const auto& c) { c.store(hn::Add(c.load(x), c.load(y)), x); });
}

void GeluTanhRange(const float* x, float* y, size_t n) {
  MapUnary(x, y, n, [](VF v) { return GeluTanh(v); });
}
void GeluErfRange(const float* x, float* y, size_t n) {
  MapUnary(x, y, n, [](VF v) { return GeluErf(v); });
}
void SiluRange(const float* x, float* y, size_t n) {
  MapUnary(x, y, n, [](VF v) { return Silu(v); });
}
void ExpRange(const float* x, float* y, size_t n) {
  MapUnary(x, y, n, [](VF v) { return Exp(v); });
}
void TanhRange(const float* x, float* y, size_t n) {
  MapUnary(x, y, n, [](VF v) { return Tanh(v); });
}
void ErfRange(const float* x, float* y, size_t n) {
  MapUnary(x, y, n, [](VF v) { return Erf(v); });
}

}  // namespace HWY_NAMESPACE
}  // namespace vidax
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace vidax {

HWY_EXPORT(LayerNormRows);
HWY_EXPORT(LayerNormModulateRows);
HWY_EXPORT(LayerNormModulateRowsBF16);
HWY_EXPORT(RmsNormRows);
HWY_EXPORT(GatedResidualAddRows);
HWY_EXPORT(AddRange);
HWY_EXPORT(GeluTanhRange);
HWY_EXPORT(GeluErfRange);
HWY_EXPORT(SiluRange);
HWY_EXPORT(ExpRange);
HWY_EXPORT(TanhRange);
HWY_EXPORT(ErfRange);

namespace {

// Below this many elements a kernel runs on the calling thread: a parallel region costs a few
// microseconds, about what one core needs for this much streaming work.
constexpr int64_t kMinParallelElements = int64_t{1} << 15;

// Calls fn(begin, end) over [0, count) split into contiguous pieces on the OpenMP pool. `work`
// is the number of elements touched per item; `align` rounds interior split points (for flat
// ranges, so pieces start on vector boundaries).
template <class Fn>
void parallel_split(int64_t count, int64_t work, int64_t align, const Fn& fn) {
  if (count <= 0) return;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t pieces = std::min<int64_t>(threads, count * work / kMinParallelElements);
  pieces = std::min(pieces, count / align);
  if (pieces <= 1) {
    fn(int64_t{0}, count);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(pieces))
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t begin = p == 0 ? 0 : (count * p / pieces) / align * align;
    const int64_t end = p == pieces - 1 ? count : (count * (p + 1) / pieces) / align * align;
    if (begin < end) fn(begin, end);
  }
}

void check_rows(int64_t rows, int64_t dim, const void* x, const void* y) {
  VIDAX_CHECK(rows >= 0 && dim >= 0, "rows ", rows, ", dim ", dim);
  VIDAX_CHECK(rows * dim == 0 || (x != nullptr && y != nullptr), "null row pointer");
}

// Splits a flat range [0, n) over the pool; fn(begin, length).
template <class Fn>
void parallel_flat(int64_t n, const void* x, const void* y, const Fn& fn) {
  VIDAX_CHECK(n >= 0, "negative length ", n);
  if (n == 0) return;
  VIDAX_CHECK(x != nullptr && y != nullptr, "null pointer");
  parallel_split(n, 1, 64, [&](int64_t b, int64_t e) { fn(b, static_cast<size_t>(e - b)); });
}

}  // namespace

void layer_norm_rows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight,
                     const float* bias, float eps) {
  check_rows(rows, dim, x, y);
  if (dim == 0) return;
  parallel_split(rows, dim, 1, [&](int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(LayerNormRows)(x, y, r0, r1, dim, weight, bias, eps);
  });
}

void layer_norm_modulate_rows(const float* x, float* y, int64_t rows, int64_t dim,
                              const float* shift, const float* scale, int64_t mod_row_stride,
                              float eps) {
  check_rows(rows, dim, x, y);
  if (dim == 0) return;
  VIDAX_CHECK(shift != nullptr && scale != nullptr && mod_row_stride >= 0, "modulation");
  parallel_split(rows, dim, 1, [&](int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(LayerNormModulateRows)
    (x, y, r0, r1, dim, shift, scale, mod_row_stride, eps);
  });
}

void layer_norm_modulate_rows_bf16(const float* x, BFloat16* y, int64_t rows, int64_t dim,
                                   const float* shift, const float* scale, int64_t mod_row_stride,
                                   float eps) {
  check_rows(rows, dim, x, y);
  if (dim == 0) return;
  VIDAX_CHECK(shift != nullptr && scale != nullptr && mod_row_stride >= 0, "modulation");
  parallel_split(rows, dim, 1, [&](int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(LayerNormModulateRowsBF16)
    (x, y, r0, r1, dim, shift, scale, mod_row_stride, eps);
  });
}

void rms_norm_rows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight,
                   float eps) {
  check_rows(rows, dim, x, y);
  if (dim == 0) return;
  parallel_split(rows, dim, 1, [&](int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(RmsNormRows)(x, y, r0, r1, dim, weight, eps);
  });
}

void gated_residual_add_rows(float* x, const float* y, const float* gate, int64_t rows, int64_t dim,
                             int64_t gate_row_stride) {
  check_rows(rows, dim, x, y);
  if (dim == 0) return;
  VIDAX_CHECK(gate != nullptr && gate_row_stride >= 0, "gate");
  parallel_split(rows, dim, 1, [&](int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(GatedResidualAddRows)(x, y, gate, r0, r1, dim, gate_row_stride);
  });
}

void add_rows(float* x, const float* y, int64_t n) {
  parallel_flat(n, x, y, [&](int64_t b, size_t len) {
    HWY_DYNAMIC_DISPATCH(AddRange)(x + b, y + b, len);
  });
}

void gelu_tanh(const float* x, float* y, int64_t n) {
  parallel_flat(n, x, y, [&](int64_t b, size_t len) {
    HWY_DYNAMIC_DISPATCH(GeluTanhRange)(x + b, y + b, len);
  });
}

void gelu_erf(const float* x, float* y, int64_t n) {
  parallel_flat(n, x, y, [&](int64_t b, size_t len) {
    HWY_DYNAMIC_DISPATCH(GeluErfRange)(x + b, y + b, len);
  });
}

void silu(const float* x, float* y, int64_t n) {
  parallel_flat(n, x, y, [&](int64_t b, size_t len) {
    HWY_DYNAMIC_DISPATCH(SiluRange)(x + b, y + b, len);
  });
}

void exp_f32(const float* x, float* y, int64_t n) {
  parallel_flat(n, x, y, [&](int64_t b, size_t len) {
    HWY_DYNAMIC_DISPATCH(ExpRange)(x + b, y + b, len);
  });
}

void tanh_f32(const float* x, float* y, int64_t n) {
  parallel_flat(n, x, y, [&](int64_t b, size_t len) {
    HWY_DYNAMIC_DISPATCH(TanhRange)(x + b, y + b, len);
  });
}

void erf_f32(const float* x, float* y, int64_t n) {
  parallel_flat(n, x, y, [&](int64_t b, size_t len) {
    HWY_DYNAMIC_DISPATCH(ErfRange)(x + b, y + b, len);
  });
}

}  // namespace vidax
#endif  // HWY_ONCE
