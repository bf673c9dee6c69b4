#include "pipeline/video_request.h"

#include "core/error.h"
#include "support/test_support.h"

namespace vidax {
namespace {

std::string error_of(int64_t w, int64_t h, int64_t f, GeometryRules rules = {}) {
  try {
    validate_video_request({w, h, f}, rules);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(VideoRequest, AcceptsWanSizes) {
  EXPECT_EQ(error_of(832, 480, 81), "");
  EXPECT_EQ(error_of(1280, 720, 1), "");
  EXPECT_EQ(error_of(16, 16, 5), "");
}

TEST(VideoRequest, ProposesNearestValidValues) {
  const std::string frames = error_of(832, 480, 80);
  EXPECT_NE(frames.find("--frames 80"), std::string::npos) << frames;
  EXPECT_NE(frames.find("77 or 81"), std::string::npos) << frames;
  EXPECT_NE(error_of(832, 480, 0).find("nearest valid: 1"), std::string::npos);
  const std::string size = error_of(840, 470, 81);
  EXPECT_NE(size.find("--size 840x470"), std::string::npos) << size;
  EXPECT_NE(size.find("width 832 or 848"), std::string::npos) << size;
  EXPECT_NE(size.find("height 464 or 480"), std::string::npos) << size;
  EXPECT_NE(error_of(8, 480, 81).find("width 16"), std::string::npos);
  // Wan 2.2's VAE needs multiples of 32.
  EXPECT_NE(error_of(848, 480, 81, {4, 32}).find("width 832 or 864"), std::string::npos);
  EXPECT_NE(error_of(100000, 480, 81).find("at most"), std::string::npos);
}

TEST(VideoRequest, LatentGeometryOfWan21) {
  const LatentGeometry g = latent_geometry({832, 480, 81}, 16, 4, 8, 1, 2);
  EXPECT_EQ(g.channels, 16);
  EXPECT_EQ(g.frames, 21);
  EXPECT_EQ(g.height, 60);
  EXPECT_EQ(g.width, 104);
  EXPECT_EQ(g.tokens, 32760);  // the sequence length quoted for Wan 1.3B at 480p x 81 frames
}

TEST(VideoRequest, MemoryPlanPeakIsLargestPhasePlusResident) {
  MemoryPlan plan;
  plan.phases = {{"encode text", 10e9, 1e9}, {"denoise", 3e9, 2e9}, {"decode", 0.5e9, 2e9}};
  plan.resident_bytes = 0.25e9;
  EXPECT_EQ(plan.largest().phase, "encode text");
  EXPECT_DOUBLE_EQ(plan.peak_bytes(), 11.25e9);
  EXPECT_NO_THROW(require_fits(plan, 12e9));
  EXPECT_NO_THROW(require_fits(plan, -1));  // unknown: not enforced
  try {
    require_fits(plan, 8e9);
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("encode text"), std::string::npos) << e.what();
  }
  EXPECT_GT(available_memory_bytes(), 0);
  EXPECT_EQ(format_bytes(3.0 * (1 << 30)), "3.00 GiB");
}

}  // namespace
}  // namespace vidax
