#include "pipeline/model_files.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;

void touch(const std::string& path, const std::string& text = "x") {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string error_of(const std::string& dir, const ModelFiles& flags = {}) {
  try {
    resolve_model_files(dir, flags);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelFiles, OfficialRepository) {
  testing::TempDir d;
  touch(d.file("diffusion_pytorch_model.safetensors"));
  touch(d.file("config.json"));
  touch(d.file("models_t5_umt5-xxl-enc-bf16.pth"));
  touch(d.file("Wan2.1_VAE.pth"));
  touch(d.file("google/umt5-xxl/spiece.model"));
  const ModelFiles f = resolve_model_files(d.path(), {});
  EXPECT_EQ(f.layout, "official");
  EXPECT_EQ(f.dit, d.file("diffusion_pytorch_model.safetensors"));
  EXPECT_EQ(f.t5, d.file("models_t5_umt5-xxl-enc-bf16.pth"));
  EXPECT_EQ(f.vae, d.file("Wan2.1_VAE.pth"));
  EXPECT_EQ(f.tokenizer, d.file("google/umt5-xxl"));
  // A sharded DiT index wins over a stray single file.
  touch(d.file("diffusion_pytorch_model.safetensors.index.json"));
  EXPECT_EQ(resolve_model_files(d.path(), {}).dit,
            d.file("diffusion_pytorch_model.safetensors.index.json"));
}

TEST(ModelFiles, DiffusersRepository) {
  testing::TempDir d;
  touch(d.file("model_index.json"), "{\"_class_name\": \"WanPipeline\"}");
  for (const char* sub : {"transformer/config.json", "text_encoder/config.json", "vae/config.json",
                          "tokenizer/spiece.model"})
    touch(d.file(sub));
  const ModelFiles f = resolve_model_files(d.path(), {});
  EXPECT_EQ(f.layout, "diffusers");
  EXPECT_EQ(f.dit, d.file("transformer"));
  EXPECT_EQ(f.t5, d.file("text_encoder"));
  EXPECT_EQ(f.vae, d.file("vae"));
  EXPECT_EQ(f.tokenizer, d.file("tokenizer"));
  EXPECT_TRUE(f.dit_low.empty());
  EXPECT_FALSE(has_two_experts(d.path()));
  // Wan 2.2 A14B: transformer_2/ is the low-noise expert, the boundary from model_index.json.
  touch(d.file("transformer_2/config.json"));
  touch(d.file("model_index.json"), "{\"boundary_ratio\": 0.9}");
  const ModelFiles e = resolve_model_files(d.path(), {});
  EXPECT_EQ(e.dit, d.file("transformer"));
  EXPECT_EQ(e.dit_low, d.file("transformer_2"));
  EXPECT_DOUBLE_EQ(e.boundary_ratio, 0.9);
  EXPECT_TRUE(has_two_experts(d.path()));
  for (const char* bad : {"{\"boundary_ratio\": 1.5}", "{\"boundary_ratio\": \"x\"}", "nope"}) {
    touch(d.file("model_index.json"), bad);
    EXPECT_NE(error_of(d.path()).find("model_index.json"), std::string::npos) << bad;
  }
}

TEST(ModelFiles, TwoExpertOfficialAndComfyUiFolders) {
  testing::TempDir off;
  for (const char* f :
       {"high_noise_model/config.json", "low_noise_model/config.json",
        "models_t5_umt5-xxl-enc-bf16.pth", "Wan2.1_VAE.pth", "google/umt5-xxl/spiece.model"})
    touch(off.file(f));
  const ModelFiles o = resolve_model_files(off.path(), {});
  EXPECT_EQ(o.dit, off.file("high_noise_model"));
  EXPECT_EQ(o.dit_low, off.file("low_noise_model"));
  // --dit alone overrides both (one model); --dit-low names the low-noise expert.
  ModelFiles one;
  one.dit = "/x.safetensors";
  EXPECT_TRUE(resolve_model_files(off.path(), one).dit_low.empty());
  fs::remove_all(off.file("low_noise_model"));
  EXPECT_NE(error_of(off.path()).find("low_noise_model/ is missing"), std::string::npos);

  testing::TempDir comfy;
  touch(comfy.file("diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors"));
  touch(comfy.file("diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors"));
  touch(comfy.file("text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors"));
  touch(comfy.file("vae/wan_2.1_vae.safetensors"));
  ModelFiles tok;
  tok.tokenizer = "/some/spiece.model";
  const ModelFiles c = resolve_model_files(comfy.path(), tok);
  EXPECT_EQ(c.dit, comfy.file("diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors"));
  EXPECT_EQ(c.dit_low,
            comfy.file("diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors"));
  EXPECT_TRUE(has_two_experts(comfy.path()));
}

TEST(ModelFiles, ComfyUiFolderNeedsTokenizerFlag) {
  testing::TempDir d;
  touch(d.file("diffusion_models/wan2.1_t2v_1.3B_bf16.safetensors"));
  touch(d.file("text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors"));
  touch(d.file("text_encoders/clip_l.safetensors"));  // other encoders are ignored
  touch(d.file("vae/wan_2.1_vae.safetensors"));
  const std::string err = error_of(d.path());
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
  ModelFiles flags;
  flags.tokenizer = "/some/spiece.model";
  const ModelFiles f = resolve_model_files(d.path(), flags);
  EXPECT_EQ(f.layout, "comfyui");
  EXPECT_EQ(f.t5, d.file("text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors"));
  EXPECT_EQ(f.vae, d.file("vae/wan_2.1_vae.safetensors"));
  EXPECT_EQ(f.tokenizer, "/some/spiece.model");
  // Two diffusion models: ambiguous, the message names both and the flag to choose.
  touch(d.file("diffusion_models/wan2.1_t2v_14B_bf16.safetensors"));
  const std::string amb = error_of(d.path(), flags);
  EXPECT_NE(amb.find("wan2.1_t2v_14B_bf16.safetensors"), std::string::npos) << amb;
  EXPECT_NE(amb.find("--dit"), std::string::npos) << amb;
  flags.dit = d.file("diffusion_models/wan2.1_t2v_14B_bf16.safetensors");
  EXPECT_EQ(resolve_model_files(d.path(), flags).dit, flags.dit);
}

TEST(ModelFiles, ExplicitFilesAndErrors) {
  ModelFiles flags{"a.safetensors", "t5.pth", "vae.pth", "spiece.model", "", "", 0, ""};
  EXPECT_EQ(resolve_model_files("", flags).layout, "explicit");
  flags.vae.clear();
  EXPECT_NE(error_of("", flags).find("--vae"), std::string::npos);
  EXPECT_NE(error_of("/no/such/folder").find("not a folder"), std::string::npos);
  testing::TempDir d;
  touch(d.file("diffusion_pytorch_model.safetensors"));
  const std::string err = error_of(d.path());
  EXPECT_NE(err.find("official layout"), std::string::npos) << err;
  EXPECT_NE(err.find("--t5"), std::string::npos) << err;
}

}  // namespace
}  // namespace vidax

namespace vidax {
namespace {

// The CLIP image encoder of Wan 2.1 I2V / FLF2V is found where each layout keeps it; a folder
// without one leaves it empty (text-to-video needs none), and --clip overrides.
TEST(ModelFiles, ClipImageEncoderInEveryLayout) {
  testing::TempDir official;
  touch(official.file("diffusion_pytorch_model.safetensors"));
  touch(official.file("models_t5_umt5-xxl-enc-bf16.pth"));
  touch(official.file("Wan2.1_VAE.pth"));
  touch(official.file("google/umt5-xxl/spiece.model"));
  EXPECT_TRUE(resolve_model_files(official.path(), {}).clip.empty());
  touch(official.file("models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth"));
  EXPECT_EQ(resolve_model_files(official.path(), {}).clip,
            official.file("models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth"));

  testing::TempDir diffusers;
  touch(diffusers.file("model_index.json"), "{}");
  for (const char* sub : {"transformer/config.json", "text_encoder/config.json", "vae/config.json",
                          "tokenizer/spiece.model", "image_encoder/config.json"})
    touch(diffusers.file(sub));
  EXPECT_EQ(resolve_model_files(diffusers.path(), {}).clip, diffusers.file("image_encoder"));

  testing::TempDir comfy;
  touch(comfy.file("diffusion_models/wan2.1_i2v_480p_14B_bf16.safetensors"));
  touch(comfy.file("text_encoders/umt5_xxl_fp16.safetensors"));
  touch(comfy.file("vae/wan_2.1_vae.safetensors"));
  touch(comfy.file("clip_vision/clip_vision_h.safetensors"));
  touch(comfy.file("clip_vision/other_clip.safetensors"));
  ModelFiles flags;
  flags.tokenizer = "spiece.model";
  EXPECT_EQ(resolve_model_files(comfy.path(), flags).clip,
            comfy.file("clip_vision/clip_vision_h.safetensors"));  // the ViT-H one preferred
  flags.clip = "mine.safetensors";
  EXPECT_EQ(resolve_model_files(comfy.path(), flags).clip, "mine.safetensors");
}

}  // namespace
}  // namespace vidax
