// oneDNN-backed PackedLinear against a plain double-precision reference, ragged sizes.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/convert.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/onednn_bf16.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;
using vidax::testing::random_tensor;

// y = x W^T + b with x, W taken as the (possibly bf16-rounded) f32 values.
Tensor reference_linear(const Tensor& x, const Tensor& w, const Tensor& b, GemmEpilogue ep) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  Tensor y = Tensor::zeros(Shape{m, n});
  const auto xv = x.to_float_vector(), wv = w.to_float_vector();
  const auto bv =
      b.defined() ? b.to_float_vector() : std::vector<float>(static_cast<size_t>(n), 0.0f);
  float* out = y.mutable_data<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bv[static_cast<size_t>(j)];
      for (int64_t p = 0; p < k; ++p)
        acc += static_cast<double>(xv[static_cast<size_t>(i * k + p)]) *
               wv[static_cast<size_t>(j * k + p)];
      if (ep == GemmEpilogue::kGeluTanh) {
        acc = 0.5 * acc * (1 + std::tanh(std::sqrt(2 / M_PI) * (acc + 0.044715 * acc * acc * acc)));
      } else if (ep == GemmEpilogue::kGeluErf) {
        acc = 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0)));
      }
      out[i * n + j] = static_cast<float>(acc);
    }
  }
  return y;
}

struct Case {
  int64_t m, k, n;
};

class GemmTest : public ::testing::TestWithParam<Case> {};

TEST_P(GemmTest, F32MatchesReference) {
  const Case c = GetParam();
  const Tensor x = random_tensor(Shape{c.m, c.k}, 1);
  const Tensor w = random_tensor(Shape{c.n, c.k}, 2, 1.0f / std::sqrt(static_cast<float>(c.k)));
  const Tensor b = random_tensor(Shape{c.n}, 3, 0.1f);
  for (GemmEpilogue ep : {GemmEpilogue::kNone, GemmEpilogue::kGeluTanh, GemmEpilogue::kGeluErf}) {
    PackedLinear lin(w, b, DType::kF32, ep);
    EXPECT_TRUE(all_close(lin(x), reference_linear(x, w, b, ep), 1e-5, 1e-5, "f32 gemm"));
  }
  PackedLinear no_bias(w, Tensor(), DType::kF32);
  EXPECT_TRUE(all_close(no_bias(x), reference_linear(x, w, Tensor(), GemmEpilogue::kNone), 1e-5,
                        1e-5, "no bias"));
}

TEST_P(GemmTest, Bf16MatchesReferenceOnRoundedInputs) {
  const Case c = GetParam();
  // Round inputs to bf16 first: the kernel then computes exact products with f32 accumulation.
  const Tensor x = random_tensor(Shape{c.m, c.k}, 4).to(DType::kBF16);
  const Tensor w =
      random_tensor(Shape{c.n, c.k}, 5, 1.0f / std::sqrt(static_cast<float>(c.k))).to(DType::kBF16);
  const Tensor b = random_tensor(Shape{c.n}, 6, 0.1f);
  PackedLinear lin(w, b, DType::kBF16);
  EXPECT_EQ(lin.compute_dtype(), DType::kBF16);
  EXPECT_TRUE(
      all_close(lin(x), reference_linear(x, w, b, GemmEpilogue::kNone), 1e-4, 1e-4, "bf16 gemm"));
}

TEST_P(GemmTest, Bf16OutputIsTheRoundedF32Output) {
  const Case c = GetParam();
  const Tensor x = random_tensor(Shape{c.m, c.k}, 9).to(DType::kBF16);
  const Tensor w = random_tensor(Shape{c.n, c.k}, 10, 0.3f).to(DType::kBF16);
  PackedLinear lin(w, random_tensor(Shape{c.n}, 11, 0.1f), DType::kBF16, GemmEpilogue::kGeluTanh);
  const Tensor f32 = lin(x);
  Tensor b16 = Tensor::zeros(Shape{c.m, c.n}, DType::kBF16);
  lin.forward_bf16_out(x.raw_data(), c.m, b16.mutable_data<BFloat16>());
  // One rounding of the same f32 value: equal to rounding our f32 result, up to one bf16 ulp
  // where the f32 results differ in the last bits across kernels.
  EXPECT_TRUE(all_close(b16, f32.to(DType::kBF16), 0, 1.0 / 128, "bf16 out"));
}

TEST_P(GemmTest, RowCountsShareOnePackedWeight) {
  const Case c = GetParam();
  const Tensor w = random_tensor(Shape{c.n, c.k}, 7, 0.2f);
  PackedLinear lin(w, Tensor(), DType::kF32);
  for (int64_t m : {int64_t{1}, c.m, c.m + 13}) {
    const Tensor x = random_tensor(Shape{m, c.k}, static_cast<uint32_t>(8 + m));
    EXPECT_TRUE(all_close(lin(x), reference_linear(x, w, Tensor(), GemmEpilogue::kNone), 1e-5, 1e-5,
                          "m=" + std::to_string(m)));
  }
}

// The bf16 paths (VIDAX_GEMM: the machine's default, oneDNN's bf16 kernels, bf16 widened to
// f32 in 512-row slices) against the reference, f32 and bf16 output, with a GELU epilogue; 1,100
// rows give two full slices and a ragged one.
TEST(Gemm, Bf16PathsMatchTheReferenceAcrossRowSlices) {
  const int64_t m = 1100, k = 40, n = 33;
  const Tensor x = random_tensor(Shape{m, k}, 21).to(DType::kBF16);
  const Tensor w = random_tensor(Shape{n, k}, 22, 0.3f).to(DType::kBF16);
  const Tensor b = random_tensor(Shape{n}, 23, 0.1f);
  const Tensor ref = reference_linear(x, w, b, GemmEpilogue::kGeluTanh);
  // Where oneDNN has no bf16 matmul (AVX2-only machines) "onednn" runs widened as well.
  if (!onednn_bf16_supported()) std::printf("oneDNN has no bf16 matmul on this machine\n");
  for (const char* mode : {"", "onednn", "widened"}) {
    if (*mode) setenv("VIDAX_GEMM", mode, 1);
    PackedLinear lin(w, b, DType::kBF16, GemmEpilogue::kGeluTanh);
    unsetenv("VIDAX_GEMM");
    EXPECT_EQ(gemm_weight_item_bytes(DType::kF32), 4);
    EXPECT_TRUE(all_close(lin(x), ref, 1e-4, 1e-4, std::string("f32 out, mode '") + mode + "'"));
    Tensor b16 = Tensor::zeros(Shape{m, n}, DType::kBF16);
    lin.forward_bf16_out(x.raw_data(), m, b16.mutable_data<BFloat16>());
    EXPECT_TRUE(all_close(b16, ref.to(DType::kBF16), 1e-4, 1.0 / 128,
                          std::string("bf16 out, mode ") + mode));
  }
  // Every path holds the weights as bf16: the widened one in oneDNN's f32 packed layout.
  EXPECT_EQ(gemm_weight_item_bytes(DType::kBF16), 2);
  setenv("VIDAX_GEMM", "widened", 1);
  const PackedLinear widened(w, b, DType::kBF16);
  unsetenv("VIDAX_GEMM");
  const PackedLinear f32(w, b, DType::kF32);
  EXPECT_EQ(2 * widened.packed_bytes(), f32.packed_bytes());
}

INSTANTIATE_TEST_SUITE_P(Ragged, GemmTest,
                         ::testing::Values(Case{1, 1, 1}, Case{3, 17, 5}, Case{18, 256, 768},
                                           Case{37, 100, 63}, Case{130, 257, 129}));

}  // namespace
}  // namespace vidax
