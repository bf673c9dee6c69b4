// Image-to-video against the official pipelines (tests/data/wan_i2v/pipelines, produced by
// running wan/image2video.py, first_last_frame2video.py and Wan 2.2 textimage2video.py on tiny
// random models): the conditioning (image tensor, size, CLIP features, mask + VAE latent, the
// TI2V image latent), every denoising step's latent, and the decoded video.
#include <map>

#include "io/safetensors.h"
#include "models/clip/clip_checkpoint.h"
#include "models/clip/clip_vision.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/vae.h"
#include "models/wan/vae_checkpoint.h"
#include "nn/image_resize.h"
#include "pipeline/denoise.h"
#include "pipeline/image_conditioning.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::all_close;

std::string pipelines(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/wan_i2v/pipelines/" + name;
}

int64_t scalar_i64(const SafetensorsFile& io, const std::string& name) {
  return io.tensor(name).data<int64_t>()[0];
}
float scalar_f32(const SafetensorsFile& io, const std::string& name) {
  return io.tensor(name).data<float>()[0];
}

Tensor image_of(const SafetensorsFile& io, const std::string& name) {
  const Tensor u8 = io.tensor(name);  // [H, W, 3]
  return rgb8_to_signed_unit({u8.data<uint8_t>(), static_cast<size_t>(u8.numel())}, u8.dim(1),
                             u8.dim(0));
}

wan::WanVae load_vae(const std::string& fixture_weights, const std::string& fixture_io) {
  const auto ck = wan::VaeCheckpoint::open(fixture_weights);
  wan::WanVae vae(ck.config(), ck.loader(), wan::Precision::kFP32);
  const auto io = SafetensorsFile::open(fixture_io);
  vae.set_latent_stats(io.tensor("scale_mean").to_float_vector(),
                       io.tensor("scale_inv_std").to_float_vector());
  return vae;
}

Tensor decode_all(wan::WanVae& vae, const Tensor& latent) {
  std::vector<Tensor> chunks;
  vae.decode(latent, [&](const Tensor& f) { chunks.push_back(f.clone()); });
  int64_t frames = 0;
  for (const auto& c : chunks) frames += c.dim(1);
  const int64_t plane = chunks.front().dim(2) * chunks.front().dim(3);
  Tensor out = Tensor::zeros(Shape{3, frames, chunks.front().dim(2), chunks.front().dim(3)});
  int64_t at = 0;
  for (const auto& c : chunks) {  // [3, n, H, W] each
    for (int64_t ch = 0; ch < 3; ++ch)
      std::copy_n(c.data<float>() + ch * c.dim(1) * plane, c.dim(1) * plane,
                  out.mutable_data<float>() + (ch * frames + at) * plane);
    at += c.dim(1);
  }
  return out;
}

// Runs the loop as the official pipelines do and compares every step.
void check_denoise(const SafetensorsFile& io, const std::string& dit_file,
                   const DenoiseConditioning& cond, double atol, double rtol) {
  const auto ck = wan::DitCheckpoint::open(dit_file);
  ck.require_loadable();
  wan::WanDit dit(ck.config(), ck.loader(), wan::Precision::kFP32);
  DenoiseOptions opt;
  opt.sampler = "unipc";
  opt.steps = static_cast<int>(scalar_i64(io, "sampling_steps"));
  opt.shift = scalar_f32(io, "shift");
  opt.guide_scale = scalar_f32(io, "guide_scale");
  const Tensor timesteps = io.tensor("timesteps");
  int checked = 0;
  const Tensor final_latent = denoise(
      dit, io.tensor("noise"), io.tensor("context"), io.tensor("context_null"),
      scalar_i64(io, "seq_len"), opt,
      [&](const DenoiseStep& s) {
        EXPECT_EQ(s.timestep, timesteps.data<int64_t>()[s.index]);
        EXPECT_TRUE(all_close(s.latent, io.tensor("step" + std::to_string(s.index) + ".latent"),
                              atol, rtol, "step " + std::to_string(s.index)));
        ++checked;
      },
      {}, cond);
  EXPECT_EQ(checked, opt.steps);
  EXPECT_TRUE(all_close(final_latent, io.tensor("final_latent"), atol, rtol, "final latent"));
}

TEST(ImageToVideo, Wan21I2vMatchesTheOfficialPipelineStepByStep) {
  VIDAX_REQUIRE_FIXTURE(vae_weights, "vae_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(vae_io, "vae_tiny.io.safetensors");
  const auto io = SafetensorsFile::open(pipelines("i2v.io.safetensors"));
  const Tensor image = image_of(io, "image_u8");
  EXPECT_TRUE(all_close(image, io.tensor("image"), 0, 0, "image tensor"));
  const PixelSize size =
      wan21_i2v_size(image.dim(2), image.dim(1), scalar_i64(io, "max_area"), 8, 2);
  EXPECT_EQ(size.width, 48);
  EXPECT_EQ(size.height, 32);

  const auto clip_ck = clip::ClipCheckpoint::open(pipelines("clip_tiny.pipelines.safetensors"));
  clip_ck.require_loadable();
  clip::ClipVisionEncoder clip(clip_ck.config(), clip_ck.loader(), clip_ck.qkv(),
                               wan::Precision::kFP32);
  const Tensor clip_fea = clip.encode({image});
  EXPECT_TRUE(all_close(clip_fea, io.tensor("clip_fea"), 1e-5, 1e-5, "clip_fea"));

  const Tensor resized = resize_bicubic(image, size.height, size.width);
  EXPECT_TRUE(all_close(resized, io.tensor("image_resized"), 1e-5, 1e-5, "resized image"));
  wan::WanVae vae = load_vae(vae_weights, vae_io);
  const int64_t frames = scalar_i64(io, "frame_num");
  const Tensor latent = vae.encode(i2v_vae_input(resized, nullptr, frames));
  const Tensor mask = i2v_frame_mask(frames, latent.dim(2), latent.dim(3), false);
  EXPECT_TRUE(all_close(mask, io.tensor("msk"), 0, 0, "mask"));
  DenoiseConditioning cond;
  cond.y = i2v_condition(mask, latent);
  cond.clip_fea = clip_fea;
  EXPECT_TRUE(all_close(cond.y, io.tensor("y"), 1e-5, 1e-5, "y"));

  check_denoise(io, pipelines("i2v_tiny.dit.safetensors"), cond, 1e-4, 1e-4);
  EXPECT_TRUE(all_close(decode_all(vae, io.tensor("final_latent")), io.tensor("video"), 1e-4, 1e-4,
                        "video"));
}

TEST(ImageToVideo, Wan22I2vA14bMatchesTheOfficialPipelineStepByStep) {
  // Wan 2.2 image2video.py: two experts without a CLIP branch, y = mask + the VAE-encoded first
  // frame, the high-noise expert for t >= 900 with its own guide scale.
  VIDAX_REQUIRE_FIXTURE(vae_weights, "vae_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(vae_io, "vae_tiny.io.safetensors");
  const auto io = SafetensorsFile::open(pipelines("i2v22.io.safetensors"));
  const Tensor image = image_of(io, "image_u8");
  const PixelSize size =
      wan21_i2v_size(image.dim(2), image.dim(1), scalar_i64(io, "max_area"), 8, 2);
  EXPECT_EQ(size.width, 48);
  EXPECT_EQ(size.height, 32);
  const Tensor resized = resize_bicubic(image, size.height, size.width);
  EXPECT_TRUE(all_close(resized, io.tensor("image_resized"), 1e-5, 1e-5, "resized image"));
  wan::WanVae vae = load_vae(vae_weights, vae_io);
  const int64_t frames = scalar_i64(io, "frame_num");
  const Tensor latent = vae.encode(i2v_vae_input(resized, nullptr, frames));
  DenoiseConditioning cond;
  cond.y = i2v_condition(i2v_frame_mask(frames, latent.dim(2), latent.dim(3), false), latent);
  EXPECT_TRUE(all_close(cond.y, io.tensor("y"), 1e-5, 1e-5, "y"));

  const auto high = wan::DitCheckpoint::open(pipelines("i2v22_high.dit.safetensors"));
  EXPECT_EQ(high.config().kind_name(), "i2v");
  EXPECT_FALSE(high.config().image_branch());
  DitExperts experts;
  experts.boundary = scalar_f32(io, "boundary");
  experts.guide_high = scalar_f32(io, "guide_high");
  experts.guide_low = scalar_f32(io, "guide_low");
  auto make = [](const std::string& file) {
    const auto ck = wan::DitCheckpoint::open(pipelines(file));
    ck.require_loadable();
    return std::make_unique<wan::WanDit>(ck.config(), ck.loader(), wan::Precision::kFP32);
  };
  experts.make_high = [&] { return make("i2v22_high.dit.safetensors"); };
  experts.make_low = [&] { return make("i2v22_low.dit.safetensors"); };
  DenoiseOptions opt;
  opt.sampler = "unipc";
  opt.steps = static_cast<int>(scalar_i64(io, "sampling_steps"));
  opt.shift = scalar_f32(io, "shift");
  const Tensor timesteps = io.tensor("timesteps"), step_expert = io.tensor("step_expert");
  int checked = 0;
  const Tensor final_latent = denoise_experts(
      experts, io.tensor("noise"), io.tensor("context"), io.tensor("context_null"),
      scalar_i64(io, "seq_len"), opt,
      [&](const DenoiseStep& s) {
        EXPECT_EQ(s.timestep, timesteps.data<int64_t>()[s.index]);
        EXPECT_EQ(s.expert, step_expert.data<int64_t>()[s.index]) << "step " << s.index;
        EXPECT_TRUE(all_close(s.latent, io.tensor("step" + std::to_string(s.index) + ".latent"),
                              1e-4, 1e-4, "step " + std::to_string(s.index)));
        ++checked;
      },
      {}, cond);
  EXPECT_EQ(checked, opt.steps);
  EXPECT_TRUE(all_close(final_latent, io.tensor("final_latent"), 1e-4, 1e-4, "final latent"));
  EXPECT_TRUE(all_close(decode_all(vae, io.tensor("final_latent")), io.tensor("video"), 1e-4, 1e-4,
                        "video"));
}

TEST(ImageToVideo, Wan21Flf2vMatchesTheOfficialPipelineStepByStep) {
  VIDAX_REQUIRE_FIXTURE(vae_weights, "vae_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(vae_io, "vae_tiny.io.safetensors");
  const auto io = SafetensorsFile::open(pipelines("flf2v.io.safetensors"));
  const Tensor first = image_of(io, "image_u8"), last = image_of(io, "last_image_u8");
  const PixelSize size =
      wan21_i2v_size(first.dim(2), first.dim(1), scalar_i64(io, "max_area"), 8, 2);
  const auto clip_ck = clip::ClipCheckpoint::open(pipelines("clip_tiny.pipelines.safetensors"));
  clip::ClipVisionEncoder clip(clip_ck.config(), clip_ck.loader(), clip_ck.qkv(),
                               wan::Precision::kFP32);
  DenoiseConditioning cond;
  cond.clip_fea = clip.encode({first, last});
  EXPECT_TRUE(all_close(cond.clip_fea, io.tensor("clip_fea"), 1e-5, 1e-5, "clip_fea"));
  const Tensor first_r = resize_bicubic(first, size.height, size.width);
  const Tensor last_r = resize_bicubic(last, size.height, size.width);
  EXPECT_TRUE(all_close(last_r, io.tensor("last_image_resized"), 1e-5, 1e-5, "last resized"));
  wan::WanVae vae = load_vae(vae_weights, vae_io);
  const int64_t frames = scalar_i64(io, "frame_num");
  const Tensor latent = vae.encode(i2v_vae_input(first_r, &last_r, frames));
  const Tensor mask = i2v_frame_mask(frames, latent.dim(2), latent.dim(3), true);
  EXPECT_TRUE(all_close(mask, io.tensor("msk"), 0, 0, "mask"));
  cond.y = i2v_condition(mask, latent);
  EXPECT_TRUE(all_close(cond.y, io.tensor("y"), 1e-5, 1e-5, "y"));
  check_denoise(io, pipelines("flf2v_tiny.dit.safetensors"), cond, 1e-4, 1e-4);
}

TEST(ImageToVideo, Wan22Ti2vMatchesTheOfficialPipelineStepByStep) {
  VIDAX_REQUIRE_FIXTURE(vae_weights, "vae22_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(vae_io, "vae22_tiny.io.safetensors");
  const auto io = SafetensorsFile::open(pipelines("ti2v.io.safetensors"));
  const Tensor u8 = io.tensor("image_u8");
  RgbImage image;
  image.width = u8.dim(1);
  image.height = u8.dim(0);
  image.rgb.assign(u8.data<uint8_t>(), u8.data<uint8_t>() + u8.numel());
  const PixelSize size =
      wan22_best_output_size(image.width, image.height, 32, 32, scalar_i64(io, "max_area"));
  EXPECT_EQ(size.width, 64);
  EXPECT_EQ(size.height, 32);
  const Tensor pixels = ti2v_image(image, size);
  EXPECT_TRUE(all_close(pixels, io.tensor("image_resized"), 0, 0, "resized image"));
  wan::WanVae vae = load_vae(vae_weights, vae_io);
  DenoiseConditioning cond;
  cond.first_frame = vae.encode(pixels.reshape(Shape{3, 1, size.height, size.width}));
  EXPECT_TRUE(all_close(cond.first_frame, io.tensor("z"), 1e-5, 1e-5, "z"));
  const Tensor noise = io.tensor("noise");
  cond.frame0_tokens = noise.dim(2) * noise.dim(3) / 4;
  // The per-token timesteps the official loop gives the DiT at step 0.
  const Tensor t_tokens = io.tensor("step0.t_tokens");
  const Tensor mine = ti2v_token_timesteps(io.tensor("timesteps").data<int64_t>()[0],
                                           t_tokens.numel(), cond.frame0_tokens);
  for (int64_t i = 0; i < t_tokens.numel(); ++i)
    EXPECT_EQ(static_cast<float>(mine.data<int64_t>()[i]), t_tokens.data<float>()[i]) << i;
  check_denoise(io, pipelines("ti2v_tiny.dit.safetensors"), cond, 1e-4, 1e-4);
  EXPECT_TRUE(all_close(decode_all(vae, io.tensor("final_latent")), io.tensor("video"), 1e-4, 1e-4,
                        "video"));
}

TEST(ImageToVideo, Wan22Ti2vTextBranchMatchesTheOfficialPipeline) {
  // The official t2v branch gives every token the same t; vidax gives the DiT one t (the same
  // embedding, computed once).
  const auto io = SafetensorsFile::open(pipelines("ti2v_t2v.io.safetensors"));
  check_denoise(io, pipelines("ti2v_tiny.dit.safetensors"), {}, 1e-4, 1e-4);
}

TEST(ImageToVideoSize, Wan21AndWan22SizeRulesMatchTheOfficialTables) {
  const auto io = SafetensorsFile::open(std::string(VIDAX_SOURCE_DIR) +
                                        "/tests/data/wan_i2v/resize.io.safetensors");
  const Tensor i2v = io.tensor("i2v_sizes");  // rows (h, w, max_area, lat_h, lat_w)
  const int64_t* r = i2v.data<int64_t>();
  for (int64_t i = 0; i < i2v.dim(0); ++i, r += 5) {
    const PixelSize s = wan21_i2v_size(r[1], r[0], r[2], 8, 2);
    EXPECT_EQ(s.height, r[3] * 8) << "row " << i;
    EXPECT_EQ(s.width, r[4] * 8) << "row " << i;
  }
  const Tensor ti2v = io.tensor("ti2v_sizes");  // (ih, iw, max_area, oh, ow, ...)
  const int64_t* q = ti2v.data<int64_t>();
  for (int64_t i = 0; i < ti2v.dim(0); ++i, q += 9) {
    const PixelSize s = wan22_best_output_size(q[1], q[0], 32, 32, q[2]);
    EXPECT_EQ(s.height, q[3]) << "row " << i;
    EXPECT_EQ(s.width, q[4]) << "row " << i;
  }
  for (int k = 0; k < 3; ++k) {
    const std::string p = "ti2v" + std::to_string(k);
    const Tensor u8 = io.tensor(p + ".in");
    RgbImage image;
    image.width = u8.dim(1);
    image.height = u8.dim(0);
    image.rgb.assign(u8.data<uint8_t>(), u8.data<uint8_t>() + u8.numel());
    const Tensor ref = io.tensor(p + ".out");
    const PixelSize s =
        wan22_best_output_size(image.width, image.height, 32, 32, scalar_i64(io, p + ".max_area"));
    EXPECT_EQ(s.height, ref.dim(1));
    EXPECT_EQ(s.width, ref.dim(2));
    EXPECT_TRUE(all_close(ti2v_image(image, s), ref, 0, 0, p));
  }
  EXPECT_THROW(wan21_i2v_size(64, 48, 100, 8, 2), InputError);  // too small for one patch
}

}  // namespace
}  // namespace vidax
