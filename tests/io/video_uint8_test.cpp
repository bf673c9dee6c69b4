// to_uint8_rgb against the official Wan rule, as computed by PyTorch
// (tests/io/data/wan_uint8_reference.safetensors, made by tools/make_wan_uint8_reference.py):
// values at and around every byte boundary, out-of-range values, infinities; NaN → 0.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "io/video_writer.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::throws_input_error;

TEST(VideoUint8, MatchesTorchOnEveryByteBoundary) {
  const SafetensorsFile file =
      SafetensorsFile::open(VIDAX_SOURCE_DIR "/tests/io/data/wan_uint8_reference.safetensors");
  const Tensor x = file.tensor("x").contiguous();        // [N] F32
  const Tensor want = file.tensor("byte").contiguous();  // [N] I32
  const int64_t n = x.numel();
  ASSERT_GT(n, 256 * 9);
  // As one channel of a [3, 1, 1, N] clip; the other channels are the reversed values.
  Tensor frames = Tensor::zeros({3, 1, 1, n});
  float* p = frames.mutable_data<float>();
  for (int64_t i = 0; i < n; ++i) {
    p[i] = x.data<float>()[i];
    p[n + i] = x.data<float>()[n - 1 - i];
    p[2 * n + i] = x.data<float>()[i];
  }
  const std::vector<uint8_t> got = to_uint8_rgb(frames);  // [1, 1, N, 3]
  int mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int expected = want.data<int32_t>()[i];
    const int expected_g = want.data<int32_t>()[n - 1 - i];
    if (got[static_cast<size_t>(3 * i)] != expected ||
        got[static_cast<size_t>(3 * i + 1)] != expected_g ||
        got[static_cast<size_t>(3 * i + 2)] != expected) {
      if (++mismatches <= 5)
        ADD_FAILURE() << "x = " << x.data<float>()[i] << ": got "
                      << int(got[static_cast<size_t>(3 * i)]) << ", torch " << expected;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(VideoUint8, EndpointsOutOfRangeAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {-1, 1, -2, 2, -inf, inf, nan, -nan, 0};
  const std::vector<uint8_t> want = {0, 255, 0, 255, 0, 255, 0, 0, 127};  // 127.5 truncates
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<float> planar(static_cast<size_t>(3 * n));
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < n; ++i)
      planar[static_cast<size_t>(c * n + i)] = values[static_cast<size_t>(i)];
  const std::vector<uint8_t> got = to_uint8_rgb(Tensor::from_floats(planar, {3, 1, 1, n}));
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(got[static_cast<size_t>(3 * i + c)], want[static_cast<size_t>(i)])
          << "value " << values[static_cast<size_t>(i)];
}

TEST(VideoUint8, LayoutIsFrameRowPixelChannel) {
  // Value encodes (c, t, y, x) so every output byte says where it came from.
  const int64_t n = 2, h = 3, w = 4;
  Tensor frames = Tensor::zeros({3, n, h, w});
  float* p = frames.mutable_data<float>();
  auto byte_for = [](int64_t c, int64_t t, int64_t y, int64_t x) {
    return static_cast<int>(c * 64 + t * 24 + y * 6 + x);
  };
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          // Middle of the byte's interval: (k + 0.5) / 255 * 2 - 1.
          p[((c * n + t) * h + y) * w + x] =
              static_cast<float>((byte_for(c, t, y, x) + 0.5) / 255.0 * 2.0 - 1.0);
  const std::vector<uint8_t> got = to_uint8_rgb(frames);
  ASSERT_EQ(got.size(), static_cast<size_t>(3 * n * h * w));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < 3; ++c)
          ASSERT_EQ(got[static_cast<size_t>(((t * h + y) * w + x) * 3 + c)], byte_for(c, t, y, x));

  // A strided view and a BF16 copy give the same bytes (BF16 within its rounding: compare to
  // the F32 conversion of the rounded values).
  // Same values stored transposed (H and W swapped), viewed back: a non-contiguous input.
  const Tensor view = frames.permute({0, 1, 3, 2}).contiguous().permute({0, 1, 3, 2});
  ASSERT_FALSE(view.is_contiguous());
  EXPECT_EQ(to_uint8_rgb(view), got);
  const Tensor bf16 = frames.to(DType::kBF16);
  EXPECT_EQ(to_uint8_rgb(bf16), to_uint8_rgb(bf16.to(DType::kF32)));
}

TEST(VideoUint8, RejectsWrongShapesAndTypes) {
  EXPECT_TRUE(throws_input_error(
      [] {
        to_uint8_rgb(Tensor::zeros({4, 1, 2, 2}));
      },
      {"[3, frames, height, width]", "[4, 1, 2, 2]"}));
  EXPECT_TRUE(throws_input_error([] { to_uint8_rgb(Tensor::zeros({3, 2, 2})); }, {"[3, 2, 2]"}));
  EXPECT_TRUE(throws_input_error(
      [] {
        to_uint8_rgb(Tensor::zeros({3, 1, 2, 2}, DType::kI32));
      },
      {"I32"}));
  EXPECT_TRUE(throws_input_error([] { to_uint8_rgb(Tensor()); }, {"empty"}));
  EXPECT_TRUE(to_uint8_rgb(Tensor::zeros({3, 0, 2, 2})).empty());
}

}  // namespace
}  // namespace vidax
