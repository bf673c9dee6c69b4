// fp8-resident linears (PackedLinear::kept) on every GEMM path (VIDAX_GEMM: the machine's
// default, oneDNN's bf16 kernels, widened; and f32 compute) against a double-precision
// reference of x . (fp8(code) x column_scale)^T + bias and the epilogue: ragged shapes, row
// counts across the widened path's 512-row slices, two fused parts with different scales,
// e4m3 and e5m2 codes, f32 and bf16 outputs; they hold one byte per weight element.
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;
using vidax::testing::random_tensor;

// Random fp8 codes [n, k] of `dtype` avoiding NaN (and e5m2's infinities).
Tensor random_codes(int64_t n, int64_t k, DType dtype, uint32_t seed) {
  Tensor t = Tensor::zeros(Shape{n, k}, dtype);
  auto* p = static_cast<uint8_t*>(t.raw_mutable_data());
  uint32_t s = seed * 2654435761u + 7;
  for (int64_t i = 0; i < n * k; ++i) {
    s = s * 1664525u + 1013904223u;
    uint8_t c = static_cast<uint8_t>(s >> 24);
    const float v = dtype == DType::kF8E4M3 ? f8e4m3_to_f32(c) : f8e5m2_to_f32(c);
    if (!std::isfinite(v) || std::fabs(v) > 64) c = static_cast<uint8_t>(c & 0x83);  // small
    p[i] = c;
  }
  return t;
}

Tensor reference(const Tensor& x_in, const Tensor& codes, const std::vector<float>& scale,
                 const Tensor& bias, GemmEpilogue ep) {
  const Tensor x = x_in.to(DType::kF32);
  const int64_t m = x.dim(0), k = x.dim(1), n = codes.dim(0);
  const auto* c = static_cast<const uint8_t*>(codes.raw_data());
  const std::vector<float> b = bias.defined() ? bias.to_float_vector() : std::vector<float>(n, 0);
  Tensor y = Tensor::zeros(Shape{m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q) {
        const uint8_t code = c[j * k + q];
        const double w =
            codes.dtype() == DType::kF8E4M3 ? f8e4m3_to_f32(code) : f8e5m2_to_f32(code);
        acc += static_cast<double>(x.data<float>()[i * k + q]) * w;
      }
      double v = acc * scale[static_cast<size_t>(j)] + b[static_cast<size_t>(j)];
      if (ep == GemmEpilogue::kGeluTanh)
        v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      if (ep == GemmEpilogue::kGeluErf) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      y.mutable_data<float>()[i * n + j] = static_cast<float>(v);
    }
  }
  return y;
}

TEST(GemmFp8, EveryPathMatchesTheReference) {
  struct Shape3 {
    int64_t m, k, n;
  };
  for (const Shape3 sh : {Shape3{7, 70, 37}, Shape3{600, 64, 96}, Shape3{1, 33, 5}}) {
    for (DType f8 : {DType::kF8E4M3, DType::kF8E5M2}) {
      const Tensor codes = random_codes(sh.n, sh.k, f8, static_cast<uint32_t>(sh.n + sh.k));
      // Two fused parts with their own scales (rows [0, n/2) and [n/2, n)).
      std::vector<float> scale(static_cast<size_t>(sh.n));
      for (int64_t j = 0; j < sh.n; ++j)
        scale[static_cast<size_t>(j)] = j < sh.n / 2 ? 0.02f : 0.005f;
      const Tensor bias = random_tensor(Shape{sh.n}, 5, 0.1f);
      for (GemmEpilogue ep :
           {GemmEpilogue::kNone, GemmEpilogue::kGeluTanh, GemmEpilogue::kGeluErf}) {
        for (const char* mode : {"", "onednn", "widened", "f32"}) {
          const bool f32 = std::string(mode) == "f32";
          if (*mode && !f32) setenv("VIDAX_GEMM", mode, 1);
          const PackedLinear lin =
              PackedLinear::kept(codes, scale, ep == GemmEpilogue::kNone ? Tensor() : bias,
                                 f32 ? DType::kF32 : DType::kBF16, ep);
          unsetenv("VIDAX_GEMM");
          EXPECT_TRUE(lin.is_kept());
          // One byte per element of the path's packed layout (padding included).
          EXPECT_GE(lin.packed_bytes(), static_cast<size_t>(sh.n * sh.k));
          EXPECT_LT(lin.packed_bytes(), static_cast<size_t>(2 * (sh.n + 64) * (sh.k + 64)));
          Tensor x = random_tensor(Shape{sh.m, sh.k}, 9);
          if (!f32) x = x.to(DType::kBF16);
          const Tensor ref =
              reference(x, codes, scale, ep == GemmEpilogue::kNone ? Tensor() : bias, ep);
          const std::string what = std::string(dtype_name(f8)) + " mode '" + mode +
                                   "' m=" + std::to_string(sh.m) + " k=" + std::to_string(sh.k) +
                                   " n=" + std::to_string(sh.n) + " ep " +
                                   std::to_string(static_cast<int>(ep));
          EXPECT_TRUE(all_close(lin(x), ref, 1e-4, 1e-4, what));
          if (!f32) {
            Tensor b16 = Tensor::zeros(Shape{sh.m, sh.n}, DType::kBF16);
            lin.forward_bf16_out(x.raw_data(), sh.m, b16.mutable_data<BFloat16>());
            EXPECT_TRUE(all_close(b16, ref, 1e-3, 1.0 / 128, what + " bf16 out"));
          }
        }
      }
    }
  }
}

// The fp8 linear gives the dequantized bf16 linear's result to bf16 rounding of the weights
// (the one converts code x scale to bf16 at load, the other scales after the GEMM).
TEST(GemmFp8, AgreesWithTheConvertedAtLoadLinear) {
  const int64_t m = 300, k = 128, n = 64;
  const Tensor codes = random_codes(n, k, DType::kF8E4M3, 3);
  const std::vector<float> scale(static_cast<size_t>(n), 0.01f);
  Tensor w = codes.to(DType::kF32);
  for (int64_t i = 0; i < n * k; ++i) w.mutable_data<float>()[i] *= 0.01f;
  const Tensor x = random_tensor(Shape{m, k}, 4).to(DType::kBF16);
  const PackedLinear converted(w, Tensor(), DType::kBF16);
  const PackedLinear kept = PackedLinear::kept(codes, scale, Tensor(), DType::kBF16);
  // Each converted weight is off by up to 2^-9 relative; over 128 products of ~0.3 that is
  // ~0.01 absolute on outputs of a few units.
  EXPECT_TRUE(all_close(kept(x), converted(x), 3e-2, 1e-2, "fp8 vs converted"));
  EXPECT_LE(2 * kept.packed_bytes(), converted.packed_bytes() + 4096);
}

// fp16 weights kept fp16 for f32 compute: two bytes per weight, the converted f32 linear's result
// to summation order (the widening is exact; the bias is added after the GEMM), every epilogue;
// bf16 compute refuses them (it holds fp16 at the same size).
TEST(GemmKeptFp16, EqualsTheConvertedF32Linear) {
  for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{7, 70, 37},
                                std::tuple<int64_t, int64_t, int64_t>{600, 64, 96}}) {
    const Tensor w = random_tensor(Shape{n, k}, 21).to(DType::kF16);
    const Tensor bias = random_tensor(Shape{n}, 22, 0.1f);
    const Tensor x = random_tensor(Shape{m, k}, 23);
    for (GemmEpilogue ep : {GemmEpilogue::kNone, GemmEpilogue::kGeluTanh, GemmEpilogue::kGeluErf}) {
      const PackedLinear converted(w, bias, DType::kF32, ep);
      const PackedLinear kept = PackedLinear::kept(
          w, std::vector<float>(static_cast<size_t>(n), 1.0f), bias, DType::kF32, ep);
      EXPECT_TRUE(kept.is_kept());
      EXPECT_LE(2 * kept.packed_bytes(), converted.packed_bytes() + 64);
      const std::string what =
          "m=" + std::to_string(m) + " ep " + std::to_string(static_cast<int>(ep));
      EXPECT_TRUE(all_close(kept(x), converted(x), 1e-5, 1e-5, what));
    }
  }
  EXPECT_THROW(PackedLinear::kept(random_tensor(Shape{4, 8}, 1).to(DType::kF16),
                                  std::vector<float>(4, 1.0f), Tensor(), DType::kBF16),
               InternalError);
}

}  // namespace
}  // namespace vidax
