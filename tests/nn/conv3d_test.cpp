// Conv3d (oneDNN, channels-last) against the scalar reference on ragged sizes: odd channel
// counts, odd H/W, T = 1, 2, 5 (after the carried frames), causal 3x3x3, (3,1,1) time convs with
// stride 1 and 2, 1x1x1, and 2-D 3x3 with padding 1 or the VAE's stride-2 right/bottom pad.
#include <cstdlib>
#include <tuple>

#include "core/convert.h"
#include "nn/conv3d.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;
using vidax::testing::random_tensor;

struct ConvCase {
  const char* name;
  int64_t cin, cout, kt, kh, kw;
  Conv3dParams p;
  bool weight_2d;  // [O, I, kh, kw] weight as nn.Conv2d stores it
};

Conv3dParams pad(int64_t t, int64_t b, int64_t l, int64_t r, std::array<int64_t, 3> s = {1, 1, 1}) {
  Conv3dParams p;
  p.stride = s;
  p.pad_top = t, p.pad_bottom = b, p.pad_left = l, p.pad_right = r;
  return p;
}

const ConvCase kCases[] = {
    {"causal3x3x3", 5, 7, 3, 3, 3, pad(1, 1, 1, 1), false},
    {"causal3x3x3_wide", 19, 33, 3, 3, 3, pad(1, 1, 1, 1), false},
    {"time311", 6, 12, 3, 1, 1, pad(0, 0, 0, 0), false},
    {"time311_stride2", 9, 9, 3, 1, 1, pad(0, 0, 0, 0, {2, 1, 1}), false},
    {"pointwise", 3, 11, 1, 1, 1, pad(0, 0, 0, 0), false},
    {"conv2d_pad1", 7, 5, 1, 3, 3, pad(1, 1, 1, 1), true},
    {"conv2d_down", 13, 13, 1, 3, 3, pad(0, 1, 0, 1, {1, 2, 2}), true},
    {"rgb_in", 3, 16, 3, 3, 3, pad(1, 1, 1, 1), false},
    {"rgb_out", 16, 3, 3, 3, 3, pad(1, 1, 1, 1), false},
};

class Conv3dTest
    : public ::testing::TestWithParam<std::tuple<ConvCase, int64_t, int64_t, int64_t>> {};

TEST_P(Conv3dTest, MatchesScalarReference) {
  const auto& [c, t_new, h, w] = GetParam();
  // The causal carry: kT - 1 frames in front of t_new new frames (stride-2 time convs need an
  // odd total, as in the VAE: 1 carried + an even number of new frames).
  int64_t t_in = t_new + c.kt - 1;
  if (c.p.stride[0] == 2 && t_in % 2 == 0) ++t_in;
  const Tensor x = random_tensor(Shape{t_in, h, w, c.cin}, 11);
  const Tensor weight = c.weight_2d
                            ? random_tensor(Shape{c.cout, c.cin, c.kh, c.kw}, 12, 0.3f)
                            : random_tensor(Shape{c.cout, c.cin, c.kt, c.kh, c.kw}, 12, 0.3f);
  const Tensor bias = random_tensor(Shape{c.cout}, 13);
  const Tensor ref = conv3d_reference(x, weight, bias, c.p);
  // F32, BF16 on this machine's path, BF16 forced through the widened path (VIDAX_CONV).
  for (int mode = 0; mode < 3; ++mode) {
    const DType compute = mode == 0 ? DType::kF32 : DType::kBF16;
    if (mode == 2) setenv("VIDAX_CONV", "widened", 1);
    Conv3d conv(weight, bias, c.p, compute);
    unsetenv("VIDAX_CONV");
    if (mode == 2) {
      ASSERT_TRUE(conv.widened());
    }
    ASSERT_EQ(conv.out_frames(t_in), ref.dim(0));
    ASSERT_EQ(conv.out_height(h), ref.dim(1));
    ASSERT_EQ(conv.out_width(w), ref.dim(2));
    Tensor out = Tensor::zeros(ref.shape());
    const Tensor xin = x.to(compute);
    conv.forward(xin.raw_data(), t_in, h, w, out.mutable_data<float>());
    if (compute == DType::kF32) {
      EXPECT_TRUE(all_close(out, ref, 1e-5, 1e-5, std::string(c.name) + " f32"));
    } else {
      // bf16 inputs and weights: compare with the reference on the rounded operands.
      const Tensor ref16 =
          conv3d_reference(xin.to(DType::kF32), weight.to(DType::kBF16), bias, c.p);
      EXPECT_TRUE(all_close(out, ref16, 1e-4, 1e-4,
                            std::string(c.name) + (mode == 2 ? " bf16 widened" : " bf16")));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ragged, Conv3dTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values<int64_t>(1, 2, 5),
                                            ::testing::Values<int64_t>(7, 10),
                                            ::testing::Values<int64_t>(9)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_t" +
                                  std::to_string(std::get<1>(info.param)) + "_h" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(Conv3d, PrimitiveCacheServesChangingExtents) {
  // The same layer is run at several frame counts and sizes (decoder chunks of 1, 2, 4 frames;
  // tiles): each extent gets its own primitive and all give the reference result.
  const Tensor weight = random_tensor(Shape{6, 4, 3, 3, 3}, 21, 0.3f);
  const Tensor bias = random_tensor(Shape{6}, 22);
  Conv3d conv(weight, bias, pad(1, 1, 1, 1), DType::kF32);
  for (auto [t, h, w] :
       {std::tuple<int64_t, int64_t, int64_t>{3, 5, 6}, {4, 5, 6}, {6, 8, 3}, {3, 5, 6}}) {
    const Tensor x = random_tensor(Shape{t, h, w, 4}, static_cast<uint32_t>(t * 100 + h));
    const Tensor ref = conv3d_reference(x, weight, bias, pad(1, 1, 1, 1));
    Tensor out = Tensor::zeros(ref.shape());
    conv.forward(x.data<float>(), t, h, w, out.mutable_data<float>());
    EXPECT_TRUE(all_close(out, ref, 1e-5, 1e-5, "extent"));
  }
  EXPECT_FALSE(conv.implementation(3, 5, 6).empty());
}

TEST(Conv3d, AccumulateAddsIntoTheDestination) {
  // accumulate = true: dst += conv(src) + bias (a residual add without a second buffer), next to
  // the plain primitive of the same extent, both dtypes, with and without bias.
  const Tensor weight = random_tensor(Shape{7, 5, 3, 3, 3}, 31, 0.3f);
  const Tensor bias = random_tensor(Shape{7}, 32);
  const Tensor x = random_tensor(Shape{4, 6, 5, 5}, 33);
  const Tensor prior = random_tensor(Shape{2, 6, 5, 7}, 34);
  for (DType compute : {DType::kF32, DType::kBF16})
    for (bool with_bias : {true, false}) {
      const Tensor b = with_bias ? bias : Tensor();
      Conv3d conv(weight, b, pad(1, 1, 1, 1), compute);
      const Tensor xin = x.to(compute);
      const Tensor ref = conv3d_reference(xin.to(DType::kF32), weight.to(compute), b,
                                          pad(1, 1, 1, 1));  // [2, 6, 5, 7]
      Tensor plain = Tensor::zeros(ref.shape());
      conv.forward(xin.raw_data(), 4, 6, 5, plain.mutable_data<float>());
      Tensor acc = prior.clone();
      conv.forward(xin.raw_data(), 4, 6, 5, acc.mutable_data<float>(), /*accumulate=*/true);
      Tensor expect = ref.clone();
      float* e = expect.mutable_data<float>();
      for (int64_t i = 0; i < expect.numel(); ++i) e[i] += prior.data<float>()[i];
      const double tol = compute == DType::kF32 ? 1e-5 : 1e-4;
      EXPECT_TRUE(all_close(plain, ref, tol, tol, "plain"));
      EXPECT_TRUE(all_close(acc, expect, tol, tol, "accumulated"));
    }
}

}  // namespace
}  // namespace vidax
