// The VAE's CausalConv (src/models/wan/vae_impl.h) against one scalar conv over the whole clip
// with two front zero frames: both ways of carrying the past (input frames in a page-backed
// window; output partial sums for few output channels), streamed in uneven chunks over two
// interleaved slots (tiles), f32 and bf16, with and without a residual to add into, and the
// resident carried bytes each keeps.
#include <cstring>

#include "models/wan/vae_impl.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::all_close;
using vidax::testing::random_tensor;

struct Case {
  const char* name;
  int64_t cin, cout;
  bool partial;  // expected carry form
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class CausalConvTest : public ::testing::TestWithParam<std::tuple<Case, DType>> {};

TEST_P(CausalConvTest, StreamEqualsWholeClipConv) {
  const auto& [c, compute] = GetParam();
  const int64_t h = 5, w = 6, kt = 3;
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  // Round weights (and below, inputs) to the compute dtype so the reference sees the operands
  // the conv sees; only the summation order differs then.
  const Tensor weight =
      random_tensor(Shape{c.cout, c.cin, kt, 3, 3}, 41, 0.3f).to(compute).to(DType::kF32);
  const Tensor bias = random_tensor(Shape{c.cout}, 42);
  CausalConv conv(weight, bias, p, compute);
  EXPECT_EQ(conv.carries_partial_sums(), c.partial);
  const std::vector<int64_t> chunks = {1, 2, 1, 3};
  int64_t total = 0;
  for (int64_t n : chunks) total += n;
  const double tol = compute == DType::kF32 ? 1e-5 : 1e-4;
  for (bool residual : {false, true}) {
    conv.reset();
    Tensor clip[2], prior[2], got[2];  // per slot: [2 + total, h, w, cin] (2 zero frames first)
    for (int s = 0; s < 2; ++s) {
      clip[s] = Tensor::zeros(Shape{kt - 1 + total, h, w, c.cin});
      const Tensor x = random_tensor(Shape{total, h, w, c.cin}, 50 + s).to(compute).to(DType::kF32);
      std::memcpy(clip[s].mutable_data<float>() + (kt - 1) * h * w * c.cin, x.data<float>(),
                  static_cast<size_t>(x.numel()) * sizeof(float));
      prior[s] = random_tensor(Shape{total, h, w, c.cout}, 60 + s);
      got[s] = Tensor::zeros(Shape{total, h, w, c.cout});
    }
    int64_t pos = 0;
    for (int64_t n : chunks) {
      for (size_t s : {size_t{1}, size_t{0}}) {  // interleaved streams, slot 1 first
        RunCtx ctx;
        ctx.slot = s;
        const float* src = clip[s].data<float>() + (kt - 1 + pos) * h * w * c.cin;
        Frames r;
        if (residual) {
          r = Frames::make(n, h, w, c.cout);
          std::memcpy(r.data.data(), prior[s].data<float>() + pos * h * w * c.cout,
                      static_cast<size_t>(n * h * w * c.cout) * sizeof(float));
        }
        Frames y = conv.run(
            ctx, n, h, w, [&](void* dst) { fill_converted(src, n * h * w * c.cin, compute, dst); },
            residual ? &r : nullptr);
        ASSERT_EQ(y.t, n);
        ASSERT_EQ(y.c, c.cout);
        std::memcpy(got[s].mutable_data<float>() + pos * h * w * c.cout, y.data.data(),
                    static_cast<size_t>(n * h * w * c.cout) * sizeof(float));
      }
      pos += n;
    }
    for (int s = 0; s < 2; ++s) {
      Tensor ref = conv3d_reference(clip[s], weight, bias, p);  // [total, h, w, cout]
      if (residual) {
        float* rp = ref.mutable_data<float>();
        for (int64_t i = 0; i < ref.numel(); ++i) rp[i] += prior[s].data<float>()[i];
      }
      EXPECT_TRUE(all_close(
          got[s], ref, tol, tol,
          std::string(c.name) + (residual ? " +residual" : "") + " slot " + std::to_string(s)));
    }
    // Resident state: two frames of inputs (compute dtype) or of partial outputs (f32).
    const size_t per_slot = c.partial
                                ? static_cast<size_t>(2 * h * w * c.cout) * sizeof(float)
                                : static_cast<size_t>(2 * h * w * c.cin) * dtype_size(compute);
    EXPECT_EQ(conv.cache_bytes(), 2 * per_slot);
  }
}

INSTANTIATE_TEST_SUITE_P(CarryForms, CausalConvTest,
                         ::testing::Combine(::testing::Values(Case{"inputs", 5, 7, false},
                                                              Case{"partial_sums", 13, 3, true}),
                                            ::testing::Values(DType::kF32, DType::kBF16)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) == DType::kF32 ? "_f32" : "_bf16");
                         });

}  // namespace
}  // namespace vidax::wan
