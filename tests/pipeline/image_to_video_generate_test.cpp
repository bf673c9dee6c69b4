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
#include "io/safetensors.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/t5_random.h"
#include "models/wan/vae_random.h"
#include "pipeline/text_to_video.h"
#include "support/test_support.h"

namespace vidax {
namespace {

std::string data(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/" + name;
}

void write_t5(const testing::TempDir& dir) {
  wan::T5Config t5;
  t5.vocab = 300, t5.dim = 32, t5.dim_attn = 32, t5.dim_ffn = 64, t5.num_heads = 2;
  t5.num_layers = 1;
  wan::write_random_t5_checkpoint(dir.file("t5.safetensors"), t5, DType::kF32, 1);
}

// Wan 2.1 I2V (or FLF2V) on the pipelines fixture's DiT and CLIP with the shared tiny VAE.
GenerateOptions i2v_options(const testing::TempDir& dir, bool flf = false) {
  write_t5(dir);
  GenerateOptions o;
  o.files.dit = data(flf ? "wan_i2v/pipelines/flf2v_tiny.dit.safetensors"
                         : "wan_i2v/pipelines/i2v_tiny.dit.safetensors");
  o.files.t5 = dir.file("t5.safetensors");
  o.files.vae = testing::wan_fixture("vae_tiny.weights.safetensors");
  o.files.tokenizer = data("tokenizer/spiece.model");
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
  if (!std::filesystem::exists(testing::wan_fixture("vae_tiny.weights.safetensors")))
    GTEST_SKIP() << "shared fixtures missing";
  testing::TempDir dir;
  GenerateOptions o = i2v_options(dir);
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
  if (!std::filesystem::exists(testing::wan_fixture("vae_tiny.weights.safetensors")))
    GTEST_SKIP() << "shared fixtures missing";
  testing::TempDir dir;
  GenerateOptions o = i2v_options(dir, true);
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

TEST(ImageToVideoGenerate, Wan22Ti2vUsesTheImageAsFrameZero) {
  testing::TempDir dir;
  write_t5(dir);
  wan::VaeConfig vae = *wan::vae_preset("wan2.2-vae");
  vae.dim = 8, vae.dec_dim = 16;
  wan::write_random_vae(dir.file("vae.safetensors"), vae, DType::kF32, 2);
  wan::DitConfig dit;
  dit.kind = wan::DitKind::kTI2V;
  dit.in_dim = dit.out_dim = 48;
  dit.dim = 128, dit.ffn_dim = 128, dit.num_heads = 1, dit.num_layers = 1, dit.text_dim = 32;
  const auto w = wan::random_dit_weights(dit, DType::kF32, 3);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& d : wan::dit_tensor_decls(dit)) tensors.emplace_back(d.name, w(d.name));
  write_safetensors(dir.file("dit.safetensors"), tensors, {{"config", dit.to_json()}});
  GenerateOptions o;
  o.files.dit = dir.file("dit.safetensors");
  o.files.t5 = dir.file("t5.safetensors");
  o.files.vae = dir.file("vae.safetensors");
  o.files.tokenizer = data("tokenizer/spiece.model");
  o.files.layout = "explicit";
  o.prompt = "x";
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
  std::vector<Tensor> first_chunk;
  o.on_frames = [&](const Tensor& f) {
    if (first_chunk.empty()) first_chunk.push_back(f.clone());
  };
  const GenerationResult r = generate(o, plan, quiet);
  EXPECT_EQ(r.frames, 5);
  // Without --image the same model is text-to-video.
  o.image.clear();
  EXPECT_EQ(plan_generation(o).task, "t2v");
}

TEST(ImageToVideoGenerate, InputErrorsNameTheFlagOrFile) {
  if (!std::filesystem::exists(testing::wan_fixture("vae_tiny.weights.safetensors")))
    GTEST_SKIP() << "shared fixtures missing";
  testing::TempDir dir;
  auto expect_error = [](const GenerateOptions& o, const std::string& needle) {
    try {
      plan_generation(o);
      FAIL() << "accepted; expected an error containing " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GenerateOptions o = i2v_options(dir);
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
