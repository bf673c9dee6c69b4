// The whole reference sampling loop (wan/text2video.py structure) against cfg_loop_tiny.
#include "pipeline/denoise.h"
#include "io/safetensors.h"
#include "models/wan/dit_checkpoint.h"
#include "sampling/scheduler.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;

TEST(Denoise, UniPCWithGuidanceMatchesReferenceLoop) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(loop_path, "cfg_loop_tiny.io.safetensors");
  auto ck = wan::DitCheckpoint::open(weights);
  ck.require_loadable();
  wan::WanDit model(
      ck.config(), [&](const std::string& n) { return ck.get(n); }, wan::Precision::kFP32);
  auto io = SafetensorsFile::open(loop_path);

  DenoiseOptions opt;
  opt.sampler = "unipc";
  opt.steps = static_cast<int>(io.tensor("timesteps").numel());
  opt.shift = io.tensor("shift").to_float_vector()[0];
  opt.guide_scale = io.tensor("guide_scale").to_float_vector()[0];

  auto sched = make_scheduler(opt.sampler, opt.steps, opt.shift);
  const auto ref_t = io.tensor("timesteps").contiguous();
  for (int i = 0; i < opt.steps; ++i)
    EXPECT_EQ(sched->timesteps()[static_cast<size_t>(i)], ref_t.data<int64_t>()[i])
        << "timestep " << i;
  EXPECT_TRUE(all_close(Tensor::from_floats(sched->sigmas(), Shape{opt.steps + 1}),
                        io.tensor("sigmas"), 0, 0, "sigmas"));

  const int64_t seq_len = io.tensor("seq_len").contiguous().data<int64_t>()[0];
  int seen = 0;
  Tensor final_latent = denoise(model, io.tensor("noise"), io.tensor("context"),
                                io.tensor("context_null"), seq_len, opt, [&](const DenoiseStep& s) {
                                  const std::string k =
                                      "step" + std::to_string(s.index) + ".latent";
                                  EXPECT_TRUE(all_close(s.latent, io.tensor(k), 1e-4, 1e-4, k));
                                  ++seen;
                                });
  EXPECT_EQ(seen, opt.steps);
  EXPECT_TRUE(all_close(final_latent, io.tensor("final_latent"), 1e-4, 1e-4, "final_latent"));
}

TEST(Denoise, GuidanceIsElementwiseInReferenceOrder) {
  VIDAX_REQUIRE_FIXTURE(loop_path, "cfg_loop_tiny.io.safetensors");
  auto io = SafetensorsFile::open(loop_path);
  const double g = io.tensor("guide_scale").to_float_vector()[0];
  for (int i = 0; i < 4; ++i) {
    const std::string p = "step" + std::to_string(i) + ".";
    EXPECT_TRUE(
        all_close(classifier_free_guidance(io.tensor(p + "cond"), io.tensor(p + "uncond"), g),
                  io.tensor(p + "noise_pred"), 0, 0, p + "noise_pred"));
  }
}

}  // namespace
}  // namespace vidax
