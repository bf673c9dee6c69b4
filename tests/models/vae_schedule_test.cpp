// The VAE's work for planners (models/wan/vae_schedule.h) against FLOPs counted by hand from the
// official module structure, on a two-stage Wan 2.1 VAE small enough to count every layer.
#include "models/wan/vae_schedule.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vidax::wan {
namespace {

using dist::OpClass;

VaeConfig tiny() {
  VaeConfig c;
  c.dim = c.dec_dim = 4;
  c.z_dim = 4;
  c.dim_mult = {1, 2};
  c.num_res_blocks = 1;
  c.temporal_downsample = {true};  // spatial stride 2, temporal stride 2
  return c;
}

// 2 x kernel taps x C_in x C_out x output pixels x output frames.
double conv(double taps, double cin, double cout, double px, double frames) {
  return 2 * taps * cin * cout * px * frames;
}

const dist::ScheduledOp* find(const dist::Schedule& s, const std::string& segment,
                              const std::string& op) {
  for (const auto& seg : s.segments)
    if (seg.name == segment)
      for (const auto& o : seg.ops)
        if (o.name == op) return &o;
  return nullptr;
}

TEST(VaeSchedule, DecodeFlopsMatchTheLayersCountedByHand) {
  // 5 frames of 6x4 pixels: 3 latent frames of 3x2 (6 pixels); z 4, decoder widths 8 -> 4.
  const dist::Schedule s = vae_decode_schedule(tiny(), 5, 4, 6, Precision::kFP32);
  const double expected_gemm =
      conv(27, 4, 8, 6, 3)                          // conv_in: z -> 8 on the 3 latent frames
      + 4 * conv(27, 8, 8, 6, 3)                    // middle: two residual blocks of two convs
      + conv(1, 8, 24, 6, 3) + conv(1, 8, 8, 6, 3)  // attention q|k|v and projection
      + 4 * conv(27, 8, 8, 6, 3)                    // stage 0: two residual blocks (8 -> 8)
      + conv(3, 8, 16, 6, 2)                        // upsample3d time conv: latent frames 1 and 2
      + conv(9, 8, 4, 24, 5)                        // 2x upsampled 3x3 conv (8 -> 4) on 1 + 2 x 2
      + 4 * conv(27, 4, 4, 24, 5)                   // stage 1: two residual blocks (4 -> 4)
      + conv(27, 4, 3, 24, 5);                      // head: 4 -> RGB
  EXPECT_DOUBLE_EQ(s.flops(OpClass::kConv) + s.flops(OpClass::kGemm), expected_gemm);
  EXPECT_DOUBLE_EQ(s.flops(OpClass::kAttention), 4.0 * 6 * 6 * 8 * 3);  // q k^T and p v per frame
  EXPECT_DOUBLE_EQ(s.flops(OpClass::kGemm), conv(1, 8, 24, 6, 3) + conv(1, 8, 8, 6, 3));  // 1x1
  const auto* time_conv = find(s, "decoder.stage0", "time_conv");
  ASSERT_NE(time_conv, nullptr);
  EXPECT_EQ(time_conv->calls, 2);  // latent frame 0 passes the time conv by
  const auto* head = find(s, "decoder.head", "conv");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->calls, 5);
  // The norms of the two middle residual blocks: 2 x 2 x (4 + 4 bytes) x 8 channels x 6 pixels
  // x 3 frames (f32 in, f32 out), among the other norms, conversions and copies.
  EXPECT_GT(s.memory_bytes(), 2 * 2 * 8.0 * 8 * 6 * 3);
}

TEST(VaeSchedule, EncodeFlopsMatchTheLayersCountedByHand) {
  const dist::Schedule s = vae_encode_schedule(tiny(), 5, 4, 6, Precision::kBF16);
  const double expected_gemm =
      conv(27, 3, 4, 24, 5)                         // conv_in: RGB -> 4 on every frame
      + 2 * conv(27, 4, 4, 24, 5)                   // stage 0: one residual block (4 -> 4)
      + conv(9, 4, 4, 6, 5)                         // 3x3 stride-2 conv per frame
      + conv(3, 4, 4, 6, 2)                         // time conv: chunk 0 passes, 4 -> 2 frames
      + conv(27, 4, 8, 6, 3) + conv(1, 4, 8, 6, 3)  // stage 1: 4 -> 8 with its 1x1 shortcut
      + conv(27, 8, 8, 6, 3)                        //          and its second conv
      + 4 * conv(27, 8, 8, 6, 3)                    // middle: two residual blocks
      + conv(1, 8, 24, 6, 3) + conv(1, 8, 8, 6, 3)  // attention q|k|v and projection
      + conv(27, 8, 8, 6, 3);                       // head: 8 -> 2 z
  EXPECT_DOUBLE_EQ(s.flops(OpClass::kConv) + s.flops(OpClass::kGemm), expected_gemm);
  EXPECT_DOUBLE_EQ(s.flops(OpClass::kAttention), 4.0 * 6 * 6 * 8 * 3);
}

TEST(VaeSchedule, Wan22DecodesPatchesAndTheOfficialSizesScale) {
  const VaeConfig c22 = *vae_preset("wan2.2-vae");
  const dist::Schedule s = vae_decode_schedule(c22, 9, 64, 96, Precision::kBF16);
  const auto* head = find(s, "decoder.head", "conv");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->calls, 9);  // 1 + 4 x 2 frames from 3 latent frames
  // The head writes 2x2 patches of RGB (12 channels) at half the resolution.
  const double dec_out = 256;  // dec_dim 256 x dim_mult[0] 1
  EXPECT_DOUBLE_EQ(head->flops, conv(27, dec_out, 12, 32 * 48, 1));

  // Wan 2.1 at 720p, 81 frames: the decode is ~0.6 PFLOP, doubling the pixels nearly doubles it.
  const VaeConfig c21 = *vae_preset("wan2.1-vae");
  const double f720 = vae_decode_schedule(c21, 81, 720, 1280, Precision::kFP32).total_flops();
  EXPECT_GT(f720, 0.5e15);
  EXPECT_LT(f720, 0.8e15);
  const double f_half = vae_decode_schedule(c21, 81, 720, 640, Precision::kFP32).total_flops();
  EXPECT_NEAR(f720 / f_half, 2.0, 0.05);
}

TEST(VaeSchedule, ImpossibleSizesAreNamed) {
  EXPECT_THROW(vae_decode_schedule(tiny(), 4, 4, 6, Precision::kBF16), InputError);
  EXPECT_THROW(vae_encode_schedule(tiny(), 5, 5, 6, Precision::kBF16), InputError);
  try {
    vae_decode_schedule(*vae_preset("wan2.1-vae"), 81, 100, 1280, Precision::kBF16);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("spatial stride 8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vidax::wan
