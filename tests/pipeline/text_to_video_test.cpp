#include "pipeline/text_to_video.h"

// GCC 12 reports a false -Wrestrict inside std::string assignment inlined into the option
// setup below (a known GCC 12 bug with libstdc++ strings at -O2).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/t5_random.h"
#include "models/wan/vae_random.h"
#include "pipeline/tiny_pipeline_files.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using nlohmann::json;
using testing::wan22_files;

TEST(TextToVideoPlan, Wan22UsesItsOfficialDefaultsUnlessTold) {
  testing::TempDir dir;
  GenerateOptions o = wan22_files(dir);
  const GenerationPlan plan = plan_generation(o);
  EXPECT_EQ(plan.vae_version, "2.2");
  EXPECT_EQ(plan.video.width, 1280);
  EXPECT_EQ(plan.video.height, 704);
  EXPECT_EQ(plan.video.frames, 121);
  EXPECT_EQ(plan.fps, 24.0);
  EXPECT_EQ(plan.latent.channels, 48);
  EXPECT_EQ(plan.latent.frames, 31);
  EXPECT_EQ(plan.latent.height, 44);  // VAE stride 16
  EXPECT_EQ(plan.latent.width, 80);
  EXPECT_EQ(plan.latent.tokens, 31 * 22 * 40);
  o.width = 832, o.height = 480, o.frames = 81, o.fps_override = 16.0;
  const GenerationPlan told = plan_generation(o);
  EXPECT_EQ(told.video.width, 832);
  EXPECT_EQ(told.fps, 16.0);
  // Wan 2.2 needs multiples of 32 (VAE stride 16 x patch 2).
  o.width = 848;
  try {
    plan_generation(o);
    FAIL() << "848 is not a multiple of 32";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("832 or 864"), std::string::npos) << e.what();
  }
}

TEST(TextToVideoPlan, MismatchedComponentsAreNamed) {
  testing::TempDir dir;
  GenerateOptions o = wan22_files(dir);
  // A Wan 2.1 VAE (16 channels) with the 48-channel DiT.
  wan::VaeConfig vae21 = *wan::vae_preset("wan2.1-vae");
  vae21.dim = vae21.dec_dim = 8;
  wan::write_random_vae(dir.file("vae21.safetensors"), vae21, DType::kF32, 4);
  o.files.vae = dir.file("vae21.safetensors");
  try {
    plan_generation(o);
    FAIL() << "expected a channel mismatch";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("latent channels 16"), std::string::npos) << e.what();
  }
}

TEST(TextToVideoPlan, ADiTWithAShortTextLenTruncatesThePrompt) {
  testing::TempDir dir;
  GenerateOptions o = wan22_files(dir);
  EXPECT_EQ(plan_generation(o).prompt_tokens, 512);  // T5 and DiT both 512
  testing::TempDir short_dir;
  o = wan22_files(short_dir, 6);
  // Far more than 6 tokens: the DiT would reject the context, so the pipeline keeps 6 (the
  // last one </s>, as the umT5 tokenizer truncates).
  o.prompt = "a red square moves to the left on a dark blue background, a green circle grows";
  o.width = 32, o.height = 32, o.frames = 1;
  o.denoise.steps = 1;
  o.hash_models = false;
  const GenerationPlan plan = plan_generation(o);
  EXPECT_EQ(plan.prompt_tokens, 6);
  EXPECT_EQ(plan.to_json()["prompt_tokens"], 6);
  int64_t frames_seen = 0;
  o.on_frames = [&](const Tensor& f) { frames_seen += f.dim(1); };
  Progress quiet(stderr, false);
  const GenerationResult r = generate(o, plan, quiet);
  EXPECT_EQ(r.frames, 1);
  EXPECT_EQ(frames_seen, 1);
}

TEST(TextToVideoBatch, EachPromptEqualsItsOwnRunAndIsPublishedWithItsSidecar) {
  testing::TempDir dir;
  GenerateOptions o = wan22_files(dir, 6);
  o.width = 32, o.height = 32, o.frames = 5;
  o.denoise.steps = 2;
  o.hash_models = false;
  const GenerationPlan plan = plan_generation(o);
  Progress quiet(stderr, false);
  const std::vector<GenerationItem> items = {{"a red square", 7, dir.file("b_001.mp4")},
                                             {"a green circle grows", 8, dir.file("b_002.mp4")},
                                             {"a red square", 9, ""}};  // no output: frames only
  std::vector<std::vector<float>> batch_frames(items.size());
  size_t current = 0;
  int64_t seen = 0;
  o.on_frames = [&](const Tensor& f) {
    const float* d = f.data<float>();
    batch_frames[current].insert(batch_frames[current].end(), d, d + f.numel());
    seen += f.dim(1);
    if (seen % 5 == 0) ++current;  // 5 frames per video
  };
  const std::vector<GenerationResult> results = generate_batch(o, items, plan, quiet);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].output, dir.file("b_001.mp4"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("b_002.mp4")));
  EXPECT_TRUE(results[2].output.empty());
  const json side = json::parse(std::ifstream(dir.file("b_002.mp4.json")));
  EXPECT_EQ(side["prompt"], "a green circle grows");
  EXPECT_EQ(side["seed"], 8);
  EXPECT_EQ(side["batch"]["index"], 1);
  EXPECT_EQ(side["batch"]["count"], 3);
  // Each video is what a run of that prompt and seed alone gives, bit for bit.
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<float> alone;
    GenerateOptions single = o;
    single.prompt = items[i].prompt;
    single.seed = items[i].seed;
    single.output.clear();
    single.on_frames = [&](const Tensor& f) {
      alone.insert(alone.end(), f.data<float>(), f.data<float>() + f.numel());
    };
    generate(single, plan, quiet);
    ASSERT_EQ(alone.size(), batch_frames[i].size()) << "video " << i;
    EXPECT_EQ(alone, batch_frames[i]) << "video " << i;
  }
  EXPECT_NE(batch_frames[0], batch_frames[2]);  // same prompt, other seed
}

TEST(TextToVideoBatch, ABadOutputAnywhereFailsBeforeAnyWork) {
  testing::TempDir dir;
  GenerateOptions o = wan22_files(dir, 6);
  o.width = 32, o.height = 32, o.frames = 1;
  o.denoise.steps = 1;
  o.hash_models = false;
  const GenerationPlan plan = plan_generation(o);
  Progress quiet(stderr, false);
  const std::vector<GenerationItem> items = {{"a", 1, dir.file("ok.mp4")},
                                             {"b", 2, dir.file("no/such/dir/x.mp4")}};
  EXPECT_THROW(generate_batch(o, items, plan, quiet), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("ok.mp4")));
  EXPECT_THROW(generate_batch(o, {{"", 1, ""}}, plan, quiet), InputError);
  EXPECT_THROW(generate_batch(o, {}, plan, quiet), InputError);
}

TEST(TextToVideoBatch, OutputsAreNumbered) {
  EXPECT_EQ(batch_output_path("out.mp4", 0, 2), "out_001.mp4");
  EXPECT_EQ(batch_output_path("dir/clip.webm", 11, 12), "dir/clip_012.webm");
  EXPECT_EQ(batch_output_path("frames/", 1, 3), "frames_002/");
  EXPECT_EQ(batch_output_path("a.b/v.mp4", 999, 1000), "a.b/v_1000.mp4");
  EXPECT_EQ(batch_output_path("noext", 4, 5), "noext_005");
  EXPECT_THROW(batch_output_path("out.mp4", 2, 2), InputError);
}

TEST(TextToVideoPlan, SidecarPathFollowsTheOutput) {
  EXPECT_EQ(sidecar_path_for("out.mp4"), "out.mp4.json");
  EXPECT_EQ(sidecar_path_for("frames/"), "frames.json");
}

}  // namespace
}  // namespace vidax

namespace vidax {
namespace {

// The denoise phase's planned weight bytes.
double denoise_weights(const GenerationPlan& p) {
  for (const auto& phase : p.memory.phases)
    if (phase.phase == "denoise") return phase.weight_bytes;
  return -1.0;
}

// Points `o` at a two-block DiT wide enough for the blocks to dominate, stored as `dtype`.
wan::DitConfig use_wide_dit(GenerateOptions& o, const testing::TempDir& dir, DType dtype) {
  wan::DitConfig dit = wan::DitCheckpoint::open(o.files.dit).config();
  dit.dim = 512, dit.ffn_dim = 1024, dit.num_heads = 4, dit.num_layers = 2;
  const std::string path = dir.file("dit_" + std::string(dtype_name(dtype)) + ".safetensors");
  wan::write_random_dit_checkpoint(path, dit, dtype, 5);
  o.files.dit = path;
  return dit;
}

// The plan counts a kept fp8 DiT at one byte per block weight (plus a widening scratch of the
// largest matrix), and the same fp8 file converted at load at the compute dtype's size.
TEST(TextToVideoPlan, KeptFp8WeightsArePlannedAtOneBytePerWeight) {
  testing::TempDir dir;
  GenerateOptions o = wan22_files(dir);
  const wan::DitConfig dit = use_wide_dit(o, dir, DType::kF8E4M3);
  const double converted = denoise_weights(plan_generation(o));
  o.keep_fp8 = true;
  const double kept = denoise_weights(plan_generation(o));
  const double blocks = 2 * wan::WanDit::block_weight_bytes(dit, wan::Precision::kBF16);
  EXPECT_NEAR(converted - kept, blocks / 2, 0.05 * blocks) << converted << " " << kept;
}

// --keep-fp16: an fp16 DiT planned at two bytes per block weight with fp32 (four converted);
// with bf16 it is refused by the plan, before any model loads.
TEST(TextToVideoPlan, KeptFp16WeightsArePlannedAtTwoBytesAndNeedFp32) {
  testing::TempDir dir;
  GenerateOptions o = wan22_files(dir);
  const wan::DitConfig dit = use_wide_dit(o, dir, DType::kF16);
  o.precision = wan::Precision::kFP32;
  const double converted = denoise_weights(plan_generation(o));
  o.keep_fp16 = true;
  const double kept = denoise_weights(plan_generation(o));
  const double blocks = 2 * wan::WanDit::block_weight_bytes(dit, wan::Precision::kFP32);
  EXPECT_NEAR(converted - kept, blocks / 2, 0.05 * blocks) << converted << " " << kept;
  o.precision = wan::Precision::kBF16;
  try {
    plan_generation(o);
    ADD_FAILURE() << "--keep-fp16 with bf16 was planned";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--precision fp32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vidax
