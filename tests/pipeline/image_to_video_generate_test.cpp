// `generate` with an input image end to end on tiny models (the official-code pipelines'
// DiT/CLIP weights, the shared tiny VAEs, a random umT5): the plan's task, size and phases, a
// complete MP4 and sidecar, and the input errors a user can make.
#include <filesystem>
#include <fstream>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "pipeline/text_to_video.h"
#include "pipeline/tiny_pipeline_files.h"
#include "support/test_support.h"

namespace vidax {
namespace {

std::string data(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/" + name;
}

// Wan 2.1 I2V (or FLF2V) on the pipelines fixture's DiT and CLIP with the shared tiny VAE.
GenerateOptions i2v_options(const testing::TempDir& dir, const std::string& vae, bool flf = false) {
  testing::write_tiny_t5(dir.file("t5.safetensors"));
  GenerateOptions o;
  o.files.dit = data(flf ? "wan_i2v/pipelines/flf2v_tiny.dit.safetensors"
                         : "wan_i2v/pipelines/i2v_tiny.dit.safetensors");
  o.files.t5 = dir.file("t5.safetensors");
  o.files.vae = vae;
  o.files.tokenizer = testing::tiny_tokenizer();
  o.files.clip = data("wan_i2v/pipelines/clip_tiny.pipelines.safetensors");
  o.files.layout = "explicit";
  o.prompt = "a red square";
  o.image = data("wan_i2v/images/photo.png");  // 45x31
  o.width = 48, o.height = 32, o.frames = 5;
  o.denoise.steps = 2;
  o.denoise_given.steps = true;
  o.denoise_given.shift = o.denoise_given.guide_scale = false;  // the family's defaults
  o.precision = wan::Precision::kFP32;
  o.hash_models = false;
  return o;
}

TEST(ImageToVideoGenerate, Wan21I2vWritesAVideoOfTheImagesAspect) {
  VIDAX_REQUIRE_FIXTURE(vae, "vae_tiny.weights.safetensors");
  testing::TempDir dir;
  GenerateOptions o = i2v_options(dir, vae);
  o.output = dir.file("out.mp4");
  const GenerationPlan plan = plan_generation(o);
  EXPECT_EQ(plan.task, "i2v");
  EXPECT_EQ(plan.image_width, 45);
  EXPECT_EQ(plan.image_height, 31);
  EXPECT_EQ(plan.max_area, 48 * 32);
  // lat_h = sqrt(1536 * 31/45) // 8 // 2 * 2 = 4, lat_w = sqrt(1536 * 45/31) // 8 // 2 * 2 = 4
  EXPECT_EQ(plan.video.width, 32);
  EXPECT_EQ(plan.video.height, 32);
  EXPECT_EQ(plan.defaults.family, "Wan 2.1 I2V 14B");
  EXPECT_EQ(plan.denoise.shift, 5.0);
  ASSERT_EQ(plan.memory.phases.size(), 4u);
  EXPECT_EQ(plan.memory.phases[1].phase, "encode image");
  EXPECT_GT(plan.memory.phases[1].total(), 0);
  Progress quiet(stderr, false);
  const GenerationResult r = generate(o, plan, quiet);
  EXPECT_EQ(r.frames, 5);
  ASSERT_TRUE(std::filesystem::exists(o.output));
  std::ifstream in(r.sidecar);
  const auto sidecar = nlohmann::json::parse(in);
  EXPECT_EQ(sidecar["task"], "i2v");
  EXPECT_EQ(sidecar["image"], o.image);
  EXPECT_EQ(sidecar["size"][0], 32);
  // The I2V negative prompt is the shared one with its prefix.
  EXPECT_TRUE(sidecar["negative_prompt"].get<std::string>().starts_with("镜头晃动，"));
}

TEST(ImageToVideoGenerate, Wan21Flf2vTakesBothFrames) {
  VIDAX_REQUIRE_FIXTURE(vae, "vae_tiny.weights.safetensors");
  testing::TempDir dir;
  GenerateOptions o = i2v_options(dir, vae, true);
  o.last_image = data("wan_i2v/images/photo.jpg");
  const GenerationPlan plan = plan_generation(o);
  EXPECT_EQ(plan.task, "flf2v");
  EXPECT_EQ(plan.defaults.family, "Wan 2.1 FLF2V 14B");
  EXPECT_EQ(plan.denoise.shift, 16.0);
  Progress quiet(stderr, false);
  const GenerationResult r = generate(o, plan, quiet);  // no output: frames only
  EXPECT_EQ(r.frames, 5);
  o.last_image.clear();
  EXPECT_THROW(plan_generation(o), InputError);  // FLF2V needs both frames
}

// The image's latent as frame 0 is checked step by step in image_to_video_test.cpp; here the
// size rule, the task and a whole run through generate().
TEST(ImageToVideoGenerate, Wan22Ti2vTakesAnImageOrNone) {
  testing::TempDir dir;
  GenerateOptions o = testing::wan22_files(dir);
  o.image = data("wan_i2v/images/photo.webp");  // 45x31
  o.width = 96, o.height = 64, o.frames = 5;
  o.denoise.steps = 2;
  o.denoise_given.steps = true;
  o.hash_models = false;
  const GenerationPlan plan = plan_generation(o);
  EXPECT_EQ(plan.task, "ti2v");
  // best_output_size(45, 31, 32, 32, 6144): 64x96 (ratio 0.67) or 96x64 (1.5, closer to 1.45)
  EXPECT_EQ(plan.video.width, 96);
  EXPECT_EQ(plan.video.height, 64);
  Progress quiet(stderr, false);
  const GenerationResult r = generate(o, plan, quiet);
  EXPECT_EQ(r.frames, 5);
  EXPECT_GT(r.image_seconds, 0);
  // Without --image the same model is text-to-video.
  o.image.clear();
  EXPECT_EQ(plan_generation(o).task, "t2v");
}

// Wan 2.2 I2V A14B (step by step in image_to_video_test.cpp): two experts, no CLIP, its
// family's defaults, a whole run through generate().
TEST(ImageToVideoGenerate, Wan22I2vA14bRunsTwoExpertsWithoutClip) {
  VIDAX_REQUIRE_FIXTURE(vae, "vae_tiny.weights.safetensors");
  testing::TempDir dir;
  GenerateOptions o = i2v_options(dir, vae);
  o.files.dit = data("wan_i2v/pipelines/i2v22_high.dit.safetensors");
  o.files.dit_low = data("wan_i2v/pipelines/i2v22_low.dit.safetensors");
  o.files.clip.clear();
  o.denoise.steps = 5;
  o.output = dir.file("a14b.mp4");
  const GenerationPlan plan = plan_generation(o);
  EXPECT_EQ(plan.task, "i2v");
  EXPECT_TRUE(plan.two_experts);
  EXPECT_TRUE(plan.clip_config.is_null());
  EXPECT_EQ(plan.defaults.family, "Wan 2.2 I2V A14B");
  EXPECT_EQ(plan.boundary, 900.0);
  EXPECT_EQ(plan.denoise.shift, 5.0);
  EXPECT_EQ(plan.denoise.guide_scale, 3.5);
  EXPECT_EQ(plan.guide_low, 3.5);
  Progress quiet(stderr, false);
  const GenerationResult r = generate(o, plan, quiet);
  EXPECT_EQ(r.frames, 5);
  // 5 steps at shift 5: timesteps 999, 952, 882, 768, 555 -> two above the boundary.
  EXPECT_EQ(r.expert_steps[0], 2);
  EXPECT_EQ(r.expert_steps[1], 3);
  std::ifstream in(r.sidecar);
  const auto sidecar = nlohmann::json::parse(in);
  EXPECT_EQ(sidecar["model_family"], "Wan 2.2 I2V A14B");
  // No prefix on Wan 2.2's negative prompt.
  EXPECT_FALSE(sidecar["negative_prompt"].get<std::string>().starts_with("镜头晃动"));
  // One expert alone is refused with the way out named.
  GenerateOptions one = o;
  one.files.dit_low.clear();
  try {
    plan_generation(one);
    FAIL() << "one Wan 2.2 I2V expert was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--dit-low"), std::string::npos) << e.what();
  }
}

TEST(ImageToVideoGenerate, InputErrorsNameTheFlagOrFile) {
  VIDAX_REQUIRE_FIXTURE(vae, "vae_tiny.weights.safetensors");
  testing::TempDir dir;
  auto expect_error = [](const GenerateOptions& o, const std::string& needle) {
    try {
      plan_generation(o);
      FAIL() << "accepted; expected an error containing " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GenerateOptions o = i2v_options(dir, vae);
  GenerateOptions no_image = o;
  no_image.image.clear();
  expect_error(no_image, "--image");
  GenerateOptions no_clip = o;
  no_clip.files.clip.clear();
  expect_error(no_clip, "--clip");
  GenerateOptions last = o;
  last.last_image = o.image;
  expect_error(last, "--last-image");
  std::ofstream(dir.file("broken.png")) << "\x89PNG\r\n\x1a\nbroken";
  GenerateOptions broken = o;
  broken.image = dir.file("broken.png");
  expect_error(broken, dir.file("broken.png"));
  GenerateOptions tiny_area = o;
  tiny_area.width = 16, tiny_area.height = 16;
  expect_error(tiny_area, "--size");
  // A text-to-video checkpoint given an image.
  GenerateOptions t2v = o;
  t2v.files.dit = testing::wan_fixture("dit_t2v_tiny.weights.safetensors");
  t2v.files.vae = testing::wan_fixture("vae_tiny.weights.safetensors");
  expect_error(t2v, "text-to-video");
}

}  // namespace
}  // namespace vidax
