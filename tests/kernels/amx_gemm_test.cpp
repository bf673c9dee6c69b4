// The AMX-BF16 GEMM against a double-precision reference on bf16-rounded inputs, ragged sizes
// (M, K and N tails, K chunking), with and without bias, GELU epilogues and bf16 output.
#include "kernels/cpu/amx_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/dtype.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"
#include "support/test_support.h"

namespace vidax {
namespace {

#define VIDAX_REQUIRE_AMX() \
  if (!amx_bf16_usable()) GTEST_SKIP() << "AMX-BF16 is not usable on this machine (CPU or OS)"

std::vector<BFloat16> random_bf16(size_t n, uint32_t seed, float scale) {
  const std::vector<float> f = vidax::testing::random_floats(n, seed, -scale, scale);
  std::vector<BFloat16> out(n);
  for (size_t i = 0; i < n; ++i) out[i].bits = f32_to_bf16(f[i]);
  return out;
}

// Reference: double sums of the exact products, bias added, then the epilogue on the f32 value
// (the kernel rounds the accumulator to f32 before GELU too, so GELU's own ulps are compared
// separately against the elementwise kernel).
std::vector<double> reference(const std::vector<BFloat16>& x, int64_t x_stride,
                              const std::vector<BFloat16>& w, const std::vector<float>* bias,
                              int64_t m, int64_t k, int64_t n) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias != nullptr ? (*bias)[static_cast<size_t>(j)] : 0.0;
      for (int64_t p = 0; p < k; ++p) {
        acc += static_cast<double>(bf16_to_f32(x[static_cast<size_t>(i * x_stride + p)].bits)) *
               bf16_to_f32(w[static_cast<size_t>(j * k + p)].bits);
      }
      y[static_cast<size_t>(i * n + j)] = acc;
    }
  }
  return y;
}

double gelu_tanh_ref(double v) {
  const double c = static_cast<double>(0.797884561f), a = static_cast<double>(0.044715f);
  return 0.5 * v * (1 + std::tanh(c * (v + a * v * v * v)));
}
double gelu_erf_ref(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }

struct Case {
  int64_t m, k, n;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "m%lld_k%lld_n%lld", static_cast<long long>(info.param.m),
                static_cast<long long>(info.param.k), static_cast<long long>(info.param.n));
  return buf;
}

class AmxGemmTest : public ::testing::TestWithParam<Case> {};

// |a - r| <= atol + rtol * sum|x_p w_p| (the accumulated magnitude; summation-order error is
// relative to it, not to the possibly cancelling result).
TEST_P(AmxGemmTest, MatchesReference) {
  VIDAX_REQUIRE_AMX();
  const Case c = GetParam();
  const int64_t x_stride = c.k + (c.m % 2 == 1 ? 3 : 0);  // also a padded row stride
  const auto x = random_bf16(static_cast<size_t>(c.m * x_stride), 1, 1.0f);
  const auto w =
      random_bf16(static_cast<size_t>(c.n * c.k), 2, 1.0f / std::sqrt(static_cast<float>(c.k)));
  const std::vector<float> bias = vidax::testing::random_floats(static_cast<size_t>(c.n), 3);
  // Magnitude bound per output for the tolerance.
  std::vector<double> mag(static_cast<size_t>(c.m * c.n), 0.0);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = std::fabs(bias[static_cast<size_t>(j)]);
      for (int64_t p = 0; p < c.k; ++p)
        s += std::fabs(
            static_cast<double>(bf16_to_f32(x[static_cast<size_t>(i * x_stride + p)].bits)) *
            bf16_to_f32(w[static_cast<size_t>(j * c.k + p)].bits));
      mag[static_cast<size_t>(i * c.n + j)] = s;
    }

  for (bool with_bias : {false, true}) {
    const AmxPackedWeight packed(w.data(), c.n, c.k, with_bias ? bias.data() : nullptr);
    const auto ref = reference(x, x_stride, w, with_bias ? &bias : nullptr, c.m, c.k, c.n);
    for (GemmEpilogue ep : {GemmEpilogue::kNone, GemmEpilogue::kGeluTanh, GemmEpilogue::kGeluErf}) {
      std::vector<float> y(static_cast<size_t>(c.m * c.n), -777.0f);
      std::vector<BFloat16> yb(static_cast<size_t>(c.m * c.n));
      amx_gemm_bf16(x.data(), c.m, x_stride, packed, y.data(), ep);
      amx_gemm_bf16(x.data(), c.m, x_stride, packed, yb.data(), ep);
      int bad = 0;
      for (size_t i = 0; i < y.size() && bad < 5; ++i) {
        const double r = ep == GemmEpilogue::kNone       ? ref[i]
                         : ep == GemmEpilogue::kGeluTanh ? gelu_tanh_ref(ref[i])
                                                         : gelu_erf_ref(ref[i]);
        // Accumulator error ~1e-6 * magnitude; GELU has slope <= 1.13 and its own few ulps.
        const double tol = 2e-6 * mag[i] + 1e-6 * std::fabs(r) + 1e-30;
        if (!(std::fabs(y[i] - r) <= tol)) {
          ADD_FAILURE() << "f32 out, bias " << with_bias << ", epilogue " << static_cast<int>(ep)
                        << ", element " << i << ": " << y[i] << " vs " << r << " (tol " << tol
                        << ")";
          ++bad;
        }
        // bf16 output is the f32 result rounded once (round to nearest even).
        if (yb[i].bits != f32_to_bf16(y[i])) {
          ADD_FAILURE() << "bf16 out, element " << i << ": " << yb[i].bits << " vs "
                        << f32_to_bf16(y[i]);
          ++bad;
        }
      }
    }
  }
}

// f32 activations are rounded while packed: bit-identical to rounding them first (f32_to_bf16,
// round to nearest even) and running the bf16 overload, on ragged K tails and a padded stride.
// Values include exact ties (so truncation instead of rounding would fail) and ±0.
TEST_P(AmxGemmTest, F32InputEqualsRoundedBf16Input) {
  VIDAX_REQUIRE_AMX();
  const Case c = GetParam();
  const int64_t x_stride = c.k + (c.m % 2 == 1 ? 5 : 0);
  std::vector<float> x =
      vidax::testing::random_floats(static_cast<size_t>(c.m * x_stride), 7, -2.0f, 2.0f);
  for (size_t i = 0; i < x.size(); i += 3) {  // ties: the bf16 value plus half an ulp
    uint32_t u = static_cast<uint32_t>(f32_to_bf16(x[i])) << 16;
    u |= ((i / 3) % 2 == 0 ? 0x8000u : 0x18000u) & 0xffffu;
    std::memcpy(&x[i], &u, 4);
  }
  if (x.size() > 2) {
    x[1] = 0.0f;
    x[2] = -0.0f;
  }
  std::vector<BFloat16> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i].bits = f32_to_bf16(x[i]);
  const auto w =
      random_bf16(static_cast<size_t>(c.n * c.k), 8, 1.0f / std::sqrt(static_cast<float>(c.k)));
  const AmxPackedWeight packed(w.data(), c.n, c.k, nullptr);
  std::vector<float> y(static_cast<size_t>(c.m * c.n), -1.0f), yb(y.size(), -2.0f);
  amx_gemm_bf16(x.data(), c.m, x_stride, packed, y.data());
  amx_gemm_bf16(xb.data(), c.m, x_stride, packed, yb.data());
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(std::memcmp(&y[i], &yb[i], 4), 0)
        << "element " << i << ": " << y[i] << " vs " << yb[i];
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t m : {1, 15, 17, 33, 100})
    for (int64_t k : {32, 40, 100, 1536})
      for (int64_t n : {1, 16, 17, 100}) out.push_back({m, k, n});
  // Larger: M blocks over threads, N groups, several panels, and a K that needs chunking.
  out.push_back({1950, 100, 1536});
  out.push_back({100, 1536, 1536});
  out.push_back({300, 4200, 70});
  out.push_back({1950, 40, 17});
  // Several K-chunked tasks per thread with growing M blocks (the deferred epilogue of a task's
  // last block must finish before the next task reuses the partial-sum buffer).
  out.push_back({700, 2100, 40});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AmxGemmTest, ::testing::ValuesIn(cases()), case_name);

// The GELU-tanh epilogue on its own: x = 0, so y = gelu(bias) for f32 biases swept densely over
// [-12, 12] plus large and special values. Reference: x / (1 + exp(-2u)) in double (the same
// function as PyTorch's 0.5 x (1 + tanh(u)) with its f32 constants, without the cancellation).
TEST(AmxGemm, GeluTanhEpilogueWithinTwoUlp) {
  VIDAX_REQUIRE_AMX();
  std::vector<float> v;
  for (int i = -120000; i <= 120000; ++i) v.push_back(static_cast<float>(i) * 1e-4f);
  for (float e : {1e-30f, 1e-10f, 1e-3f, 15.0f, 20.0f, 87.0f, 1e3f, 1e20f, 3e38f}) {
    v.push_back(e);
    v.push_back(-e);
  }
  v.push_back(0.0f);
  const int64_t n = static_cast<int64_t>(v.size()), k = 32, m = 2;
  const std::vector<BFloat16> x(static_cast<size_t>(m * k), BFloat16{0});
  const std::vector<BFloat16> w(static_cast<size_t>(n * k), BFloat16{0x3f80});
  const AmxPackedWeight packed(w.data(), n, k, v.data());
  std::vector<float> y(static_cast<size_t>(m * n)), lib(v.size());
  amx_gemm_bf16(x.data(), m, k, packed, y.data(), GemmEpilogue::kGeluTanh);
  gelu_tanh(v.data(), lib.data(), n);
  const double c = static_cast<double>(0.797884561f), a = static_cast<double>(0.044715f);
  int bad = 0;
  double worst_ulp = 0;
  for (int64_t i = 0; i < n && bad < 10; ++i) {
    const double xv = v[static_cast<size_t>(i)];
    const double r = xv / (1 + std::exp(-2 * c * (xv + a * xv * xv * xv)));
    // ilogb(0) is INT_MIN: the smallest subnormal is the ulp there.
    const double ulp =
        static_cast<float>(r) == 0.0f
            ? 1.4e-45
            : std::max(std::ldexp(1.0, std::ilogb(static_cast<float>(r)) - 23), 1.4e-45);
    const double err = std::fabs(y[static_cast<size_t>(n + i)] - r) / ulp;  // second row
    worst_ulp = std::max(worst_ulp, err);
    if (!(err <= 2.0) || y[static_cast<size_t>(i)] != y[static_cast<size_t>(n + i)]) {
      ADD_FAILURE() << "gelu_tanh(" << xv << ") = " << y[static_cast<size_t>(n + i)] << ", want "
                    << r << " (" << err << " ulp)";
      ++bad;
    }
    // And within a few ulp of the library kernel (itself within 3 ulp).
    const double lib_err = std::fabs(y[static_cast<size_t>(i)] - lib[static_cast<size_t>(i)]) / ulp;
    if (!(lib_err <= 5.0)) {
      ADD_FAILURE() << "vs elementwise gelu_tanh at " << xv << ": " << lib_err << " ulp";
      ++bad;
    }
  }
  RecordProperty("worst_ulp", std::to_string(worst_ulp));
}

// The Tensor constructor converts f32 weights to bf16 (round to nearest even) before packing.
TEST(AmxGemm, TensorConstructorMatchesRawBf16) {
  VIDAX_REQUIRE_AMX();
  const int64_t m = 40, k = 72, n = 50;
  const Tensor wf = vidax::testing::random_tensor(Shape{n, k}, 7);
  const Tensor bf = vidax::testing::random_tensor(Shape{n}, 8);
  const Tensor wb = wf.to(DType::kBF16);
  const auto x = random_bf16(static_cast<size_t>(m * k), 9, 1.0f);
  const AmxPackedWeight a(wf, bf), b(wb.data<BFloat16>(), n, k, bf.data<float>());
  EXPECT_EQ(a.n(), n);
  EXPECT_EQ(a.k(), k);
  std::vector<float> ya(static_cast<size_t>(m * n)), yb(ya.size());
  amx_gemm_bf16(x.data(), m, k, a, ya.data());
  amx_gemm_bf16(x.data(), m, k, b, yb.data());
  EXPECT_EQ(ya, yb);
}

// fp8 weights kept fp8 (widened per panel chunk inside the kernel through a code table) give the
// bits of the same GEMM on their bf16 values, then fma(acc, scale, bias): every finite code, K
// over two chunks, M over several blocks, ragged N, f32 and bf16 outputs.
TEST(AmxGemm, Fp8WeightsWidenedPerTileEqualTheirBf16Values) {
  VIDAX_REQUIRE_AMX();
  for (const DType f8 : {DType::kF8E4M3, DType::kF8E5M2}) {
    for (const Case c : {Case{300, 2100, 70}, Case{5, 40, 33}, Case{600, 96, 64}}) {
      const size_t nk = static_cast<size_t>(c.n * c.k);
      std::vector<uint8_t> codes(nk);
      for (size_t i = 0; i < nk; ++i) {
        auto code = static_cast<uint8_t>((i * 7 + i / 256) % 256);
        const float v = f8 == DType::kF8E4M3 ? f8e4m3_to_f32(code) : f8e5m2_to_f32(code);
        codes[i] = std::isfinite(v) ? code : 0;
      }
      std::vector<BFloat16> values(nk);
      convert_floats(codes.data(), f8, values.data(), DType::kBF16, nk);
      std::vector<float> scale(static_cast<size_t>(c.n)), bias(scale.size());
      for (size_t j = 0; j < scale.size(); ++j) {
        scale[j] = 0.001f * static_cast<float>(j % 5 + 1);
        bias[j] = 0.01f * static_cast<float>(static_cast<int>(j % 3) - 1);
      }
      const AmxPackedWeight kept =
          AmxPackedWeight::fp8(codes.data(), f8, c.n, c.k, scale, bias.data());
      const AmxPackedWeight plain(values.data(), c.n, c.k, nullptr);
      EXPECT_TRUE(kept.is_fp8());
      EXPECT_EQ(kept.packed_bytes(), AmxPackedWeight::packed_elements(c.n, c.k));
      const auto x = random_bf16(static_cast<size_t>(c.m * c.k), 11, 1.0f);
      const size_t mn = static_cast<size_t>(c.m * c.n);
      std::vector<float> acc(mn), got(mn), want(mn);
      std::vector<BFloat16> got16(mn);
      amx_gemm_bf16(x.data(), c.m, c.k, plain, acc.data());
      amx_gemm_bf16(x.data(), c.m, c.k, kept, got.data());
      amx_gemm_bf16(x.data(), c.m, c.k, kept, got16.data());
      for (size_t i = 0; i < mn; ++i) {
        const size_t j = i % static_cast<size_t>(c.n);
        want[i] = std::fma(acc[i], scale[j], bias[j]);
      }
      const std::string what = std::string(dtype_name(f8)) + " m" + std::to_string(c.m) + " k" +
                               std::to_string(c.k) + " n" + std::to_string(c.n);
      ASSERT_EQ(got, want) << what;
      for (size_t i = 0; i < mn; ++i)
        ASSERT_EQ(got16[i].bits, f32_to_bf16(want[i])) << what << " bf16 out, element " << i;
    }
  }
}

}  // namespace
}  // namespace vidax
