// The VAE's frame ops against their scalar references (video_ops_reference.cpp), plus direct
// checks of the index conventions the fixtures rely on (patchify channel order, DupUp3D then
// AvgDown3D round trip).
#include <cmath>

#include "nn/video_ops.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;
using vidax::testing::random_tensor;

Tensor zeros(std::initializer_list<int64_t> dims) { return Tensor::zeros(Shape(dims)); }

TEST(VideoOps, RmsNormChannelsWithAndWithoutSilu) {
  for (int64_t c : {1, 3, 17, 96}) {
    const Tensor x = random_tensor(Shape{37, c}, 3, 2.0f);
    const Tensor g = random_tensor(Shape{c}, 4);
    for (bool silu : {false, true}) {
      Tensor y = zeros({37, c}), ref = zeros({37, c});
      rms_norm_channels(x.data<float>(), y.mutable_data<float>(), DType::kF32, 37, c,
                        g.data<float>(), silu);
      rms_norm_channels_reference(x.data<float>(), ref.mutable_data<float>(), 37, c,
                                  g.data<float>(), silu);
      EXPECT_TRUE(all_close(y, ref, 1e-6, 1e-5, "rms c=" + std::to_string(c)));
      Tensor y16 = Tensor::zeros(Shape{37, c}, DType::kBF16);
      rms_norm_channels(x.data<float>(), y16.raw_mutable_data(), DType::kBF16, 37, c,
                        g.data<float>(), silu);
      EXPECT_TRUE(all_close(y16.to(DType::kF32), ref, 1e-2, 1e-2, "rms bf16"));
    }
  }
  // An all-zero row stays zero (eps clamp), no NaN.
  Tensor x0 = zeros({1, 4}), y0 = zeros({1, 4});
  const std::vector<float> g(4, 1.0f);
  rms_norm_channels(x0.data<float>(), y0.mutable_data<float>(), DType::kF32, 1, 4, g.data(), true);
  for (float v : y0.to_float_vector()) EXPECT_EQ(v, 0.0f);
}

TEST(VideoOps, UpsampleNearest2x) {
  const Tensor x = random_tensor(Shape{2, 3, 5, 7}, 5);
  Tensor y = zeros({2, 6, 10, 7}), ref = zeros({2, 6, 10, 7});
  upsample_nearest2x(x.data<float>(), y.mutable_data<float>(), 2, 3, 5, 7);
  upsample_nearest2x_reference(x.data<float>(), ref.mutable_data<float>(), 2, 3, 5, 7);
  EXPECT_TRUE(all_close(y, ref, 0, 0, "upsample"));
  // The byte-wise form on bf16 pixels is the same gather.
  const Tensor x16 = x.to(DType::kBF16);
  Tensor y16 = Tensor::zeros(Shape{2, 6, 10, 7}, DType::kBF16);
  upsample_nearest2x_bytes(x16.raw_data(), y16.raw_mutable_data(), 2, 3, 5, 7 * 2);
  EXPECT_TRUE(all_close(y16.to(DType::kF32), ref.to(DType::kBF16).to(DType::kF32), 0, 0, "bf16"));
}

struct Factors {
  int64_t c_in, c_out, ft, fs, t, pad_or_drop;
};

class AvgDupTest : public ::testing::TestWithParam<Factors> {};

TEST_P(AvgDupTest, AvgDown3dMatchesReference) {
  const Factors f = GetParam();
  const int64_t h = 4, w = 6;
  const int64_t pad = (f.ft - f.t % f.ft) % f.ft;
  const Tensor x = random_tensor(Shape{f.t, h, w, f.c_in}, 6);
  const int64_t to = (f.t + pad) / f.ft;
  Tensor y = zeros({to, h / f.fs, w / f.fs, f.c_out}),
         ref = zeros({to, h / f.fs, w / f.fs, f.c_out});
  avg_down3d(x.data<float>(), y.mutable_data<float>(), f.t, h, w, f.c_in, f.c_out, f.ft, f.fs, pad);
  avg_down3d_reference(x.data<float>(), ref.mutable_data<float>(), f.t, h, w, f.c_in, f.c_out, f.ft,
                       f.fs, pad);
  EXPECT_TRUE(all_close(y, ref, 1e-6, 1e-6, "avg_down3d"));
}

TEST_P(AvgDupTest, DupUp3dMatchesReferenceAndInvertsAvgDown) {
  const Factors f = GetParam();
  const int64_t h = 2, w = 3;
  // DupUp3D goes the other way: c_out of AvgDown is its input.
  const Tensor x = random_tensor(Shape{f.t, h, w, f.c_out}, 7);
  const int64_t drop = std::min(f.pad_or_drop, f.ft - 1);
  const int64_t to = f.t * f.ft - drop;
  Tensor y = zeros({to, h * f.fs, w * f.fs, f.c_in}), ref = zeros({to, h * f.fs, w * f.fs, f.c_in});
  dup_up3d(x.data<float>(), y.mutable_data<float>(), f.t, h, w, f.c_out, f.c_in, f.ft, f.fs, drop);
  dup_up3d_reference(x.data<float>(), ref.mutable_data<float>(), f.t, h, w, f.c_out, f.c_in, f.ft,
                     f.fs, drop);
  EXPECT_TRUE(all_close(y, ref, 0, 0, "dup_up3d"));
  if (drop == 0) {
    // Averaging duplicated values gives them back: AvgDown3D(DupUp3D(x)) == x.
    Tensor back = zeros({f.t, h, w, f.c_out});
    avg_down3d(y.data<float>(), back.mutable_data<float>(), to, h * f.fs, w * f.fs, f.c_in, f.c_out,
               f.ft, f.fs, 0);
    EXPECT_TRUE(all_close(back, x, 1e-6, 1e-6, "avg(dup(x))"));
  }
}

INSTANTIATE_TEST_SUITE_P(Factors, AvgDupTest,
                         ::testing::Values(Factors{4, 8, 2, 2, 1, 1},  // chunk 0: padded / dropped
                                           Factors{4, 8, 2, 2, 4, 0}, Factors{8, 16, 2, 2, 2, 0},
                                           Factors{4, 4, 1, 2, 3, 0}, Factors{16, 16, 1, 1, 2, 0},
                                           Factors{6, 3, 2, 1, 3, 1}));

TEST(VideoOps, PatchifyChannelOrderIsCThenColumnThenRow) {
  // "b c f (h q) (w r) -> b (c r q) f h w": channel (c * 2 + r) * 2 + q holds pixel
  // (h * 2 + q, w * 2 + r) of colour c.
  const Tensor video = random_tensor(Shape{3, 3, 4, 6}, 8);  // [c, t, H, W]
  Tensor y = zeros({2, 2, 3, 12});
  patchify_frames(video, 1, 2, 2, y.mutable_data<float>());
  const float* v = video.data<float>();
  const float* p = y.data<float>();
  for (int64_t f = 0; f < 2; ++f)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t r = 0; r < 2; ++r)
            for (int64_t q = 0; q < 2; ++q)
              ASSERT_EQ(p[((f * 2 + i) * 3 + j) * 12 + (c * 2 + r) * 2 + q],
                        v[((c * 3 + 1 + f) * 4 + i * 2 + q) * 6 + j * 2 + r]);
  Tensor back = zeros({3, 2, 4, 6});
  unpatchify_frames(y.data<float>(), 2, 2, 3, 3, 2, back);
  EXPECT_TRUE(all_close(back, video.slice(1, 1, 3).contiguous(), 0, 0, "unpatchify"));
}

}  // namespace
}  // namespace vidax
