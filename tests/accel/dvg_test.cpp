// DVG (progressive resolution): the stage-switch arithmetic against Jenga's (torch's trilinear
// interpolate, step_to_zero, add_noise; tests/data/accel/dvg_switch.safetensors), the sampler
// restart, the identity switch equal to an Euler step, one stage equal to the dense loop bit for
// bit, the grids and schedule of a reduced run, the content measures and the automatic choice on
// hand-built latents, and the refusals.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "accel/dvg.h"
#include "accel/stage_switch.h"
#include "accel/step_method.h"
#include "accel/tiny_loop.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "sampling/scheduler.h"
#include "sampling/torch_randn.h"
#include "support/test_support.h"

namespace vidax::accel {
namespace {

using testing::all_close;

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = SafetensorsFile::open(
      std::string(VIDAX_SOURCE_DIR) + "/tests/data/accel/dvg_switch.safetensors");
  return f;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data<float>(), y.data<float>(), static_cast<size_t>(x.numel()) * 4) == 0;
}

TEST(DvgSwitch, EqualsJengasStepToZeroInterpolateAndAddNoise) {
  for (const std::string c : {"space", "odd", "joint", "time"}) {
    const SafetensorsFile& f = fixture();
    const Tensor sig = f.tensor(c + ".sigmas");
    const float sigma = sig.data<float>()[0], next = sig.data<float>()[1];
    const Tensor x0 = data_prediction(f.tensor(c + ".x"), f.tensor(c + ".v"), sigma);
    EXPECT_TRUE(all_close(x0, f.tensor(c + ".x0"), 0, 0, c + " x0"));
    const Tensor want_up = f.tensor(c + ".up");
    const Tensor up = resize_latent(x0, grid_of(want_up));
    EXPECT_TRUE(all_close(up, want_up, 1e-6, 1e-6, c + " resize"));
    EXPECT_TRUE(all_close(renoise(up, f.tensor(c + ".noise"), next), f.tensor(c + ".out"), 1e-6,
                          1e-6, c + " renoise"));
  }
}

TEST(DvgSwitch, IdentityResizeAndCropKeepValues) {
  const Tensor x = torch_randn(5, Shape{3, 4, 6, 8});
  EXPECT_TRUE(bit_equal(resize_latent(x, {4, 6, 8}), x));
  const Tensor corner = crop_latent(x, {2, 3, 5});
  EXPECT_EQ(corner.shape(), (Shape{3, 2, 3, 5}));
  EXPECT_EQ(corner.data<float>()[0], x.data<float>()[0]);
  EXPECT_EQ(corner.data<float>()[5 + 2], x.contiguous().data<float>()[8 + 2]);  // row 1, col 2
  EXPECT_DEATH((void)resize_latent(x, {4, 3, 8}), "not an upsampling");
}

TEST(DvgSwitch, RestartedSamplerRunsAFirstStep) {
  const Tensor x = torch_randn(1, Shape{2, 1, 2, 4}), v = torch_randn(2, Shape{2, 1, 2, 4});
  for (const std::string name : {"unipc", "dpm++", "euler"}) {
    // Restarted at 0 after two steps: the same as a fresh sampler.
    auto fresh = make_scheduler(name, 6, 5.0);
    auto used = make_scheduler(name, 6, 5.0);
    Tensor y = used->step(v, x);
    y = used->step(v, y);
    used->restart_at(0);
    EXPECT_EQ(used->step_index(), 0);
    EXPECT_TRUE(bit_equal(used->step(v, x), fresh->step(v, x))) << name;
  }
  // Euler keeps no history: a restart in the middle changes nothing.
  auto a = make_scheduler("euler", 6, 5.0), b = make_scheduler("euler", 6, 5.0);
  Tensor ya = a->step(v, x), yb = b->step(v, x);
  b->restart_at(1);
  EXPECT_TRUE(bit_equal(a->step(v, ya), b->step(v, yb)));
  // UniPC restarted at 3 runs step 3 without its corrector.
  auto u = make_scheduler("unipc", 6, 5.0);
  Tensor yu = x;
  for (int i = 0; i < 3; ++i) yu = u->step(v, yu);
  u->restart_at(3);
  (void)u->step(v, yu);
  EXPECT_FALSE(u->last_corrected_sample().defined());
  EXPECT_DEATH(u->restart_at(6), "restart at step 6");
}

// A method that switches to the same grid after `at`, with noise = x0 + v: re-noising x0 to
// sigma_{i+1} then equals the Euler step x + (sigma_{i+1} - sigma_i) v.
class IdentitySwitch : public StepMethod {
 public:
  IdentitySwitch(RunInfo run, int at) : StepMethod(std::move(run)), at_(at) {}
  std::string name() const override { return "identity-switch"; }
  std::optional<StageSwitch> stage_after(int step, const Tensor& x, const Tensor& pred,
                                         float sigma) override {
    if (step != at_) return std::nullopt;
    const Tensor x0 = data_prediction(x, pred, sigma);
    Tensor noise = x0.clone();
    const Tensor p = pred.contiguous();
    for (int64_t i = 0; i < noise.numel(); ++i)
      noise.mutable_data<float>()[i] += p.data<float>()[i];
    return StageSwitch{grid_of(x), 0, noise};
  }

 private:
  int at_;
};

TEST(Dvg, IdentitySwitchUnderEulerIsAnEulerStep) {
  VIDAX_REQUIRE_TINY_LOOP();
  const std::vector<Tensor> dense = tiny::tiny_loop_latents(nullptr, 6, "euler");
  IdentitySwitch m(tiny::tiny_run_info(6, "euler"), 2);
  const std::vector<Tensor> got = tiny::tiny_loop_latents(&m, 6, "euler");
  ASSERT_EQ(got.size(), dense.size());
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_TRUE(all_close(got[s], dense[s], 1e-5, 1e-5, "step " + std::to_string(s)));
}

TEST(Dvg, OneStageIsTheDenseRunBitForBit) {
  VIDAX_REQUIRE_TINY_LOOP();
  const std::vector<Tensor> dense = tiny::tiny_loop_latents(nullptr, 8);
  for (const std::string spec : {"mode=full", "switch=0", "mode=joint,switch=0"}) {
    const auto m = make_dvg(spec, tiny::tiny_run_info(8));
    const std::vector<Tensor> got = tiny::tiny_loop_latents(m.get(), 8);
    ASSERT_EQ(got.size(), dense.size());
    for (size_t s = 0; s < got.size(); ++s) EXPECT_TRUE(bit_equal(got[s], dense[s])) << spec;
    EXPECT_EQ(m->report().schedule_cond, "CCCCCCCC") << spec;
    EXPECT_DOUBLE_EQ(m->report().work_fraction, 1.0) << spec;
  }
}

TEST(Dvg, ReducedStagesRunOnSmallerGridsAndEndOnTheFullOne) {
  VIDAX_REQUIRE_TINY_LOOP();
  // The tiny latent [16, 3, 4, 6], patch (1, 2, 2): joint at 0.75 / 0.5 is 2 x 2 x 4.
  RunInfo run = tiny::tiny_run_info(8);
  run.latent = {3, 4, 6};
  run.seed = 7;
  const auto m = make_dvg("mode=joint,switch=0.5", run);
  auto* dvg = dynamic_cast<Dvg*>(m.get());
  ASSERT_NE(dvg, nullptr);
  EXPECT_EQ(dvg->reduced("joint", {3, 4, 6}), (LatentGrid{2, 2, 4}));
  EXPECT_EQ(dvg->reduced("space", {3, 4, 6}), (LatentGrid{3, 2, 4}));
  EXPECT_EQ(dvg->reduced("time", {3, 4, 6}), (LatentGrid{2, 4, 6}));
  EXPECT_EQ(dvg->reduced("time", {1, 4, 6}), (LatentGrid{1, 4, 6}));  // one frame stays
  const auto planned = m->planned_report();
  ASSERT_TRUE(planned.has_value());
  const std::vector<Tensor> got = tiny::tiny_loop_latents(m.get(), 8);
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_EQ(grid_of(got[s]), (s < 3 ? LatentGrid{2, 2, 4} : LatentGrid{3, 4, 6})) << s;
  const StepReport r = m->report();
  EXPECT_EQ(r.schedule_cond, "rrrrCCCC");
  EXPECT_EQ(r.schedule_uncond, "rrrrCCCC");
  EXPECT_LT(r.work_fraction, 1.0);
  EXPECT_GT(r.work_fraction, 0.5);
  // The plan printed before running is what ran.
  EXPECT_EQ(planned->schedule_cond, r.schedule_cond);
  EXPECT_DOUBLE_EQ(planned->work_fraction, r.work_fraction);
  EXPECT_EQ(planned->details["stages"], r.details["stages"]);
  EXPECT_EQ(r.details["stages"][1]["first_step"], 4);
  EXPECT_EQ(r.details["stages"][0]["tokens"], 2 * 1 * 2);
  // Deterministic: the re-noise comes from the seed.
  const auto again = make_dvg("mode=joint,switch=0.5", run);
  EXPECT_TRUE(bit_equal(tiny::tiny_loop_latents(again.get(), 8).back(), got.back()));
  for (int64_t i = 0; i < got.back().numel(); ++i)
    ASSERT_TRUE(std::isfinite(got.back().data<float>()[i]));
}

// [1, F, H, W] latents: constant frames (no motion, no detail), alternating frames, a
// checkerboard.
Tensor latent_of(int64_t F, int64_t H, int64_t W, float (*value)(int64_t, int64_t, int64_t)) {
  Tensor t = Tensor::zeros(Shape{1, F, H, W});
  for (int64_t f = 0; f < F; ++f)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) t.mutable_data<float>()[(f * H + h) * W + w] = value(f, h, w);
  return t;
}

TEST(Dvg, ContentMeasuresSeeMotionAndDetail) {
  // Smooth in space, the same every frame: a ramp.
  const ContentMeasures still =
      content_measures(latent_of(5, 8, 8, [](int64_t, int64_t h, int64_t) { return float(h); }));
  EXPECT_DOUBLE_EQ(still.motion, 0.0);
  EXPECT_LT(still.detail, 0.1);  // only the clamped edges differ from their blur
  // Frames flip sign (from frame 1 on): strong motion.
  const ContentMeasures moving =
      content_measures(latent_of(5, 8, 8, [](int64_t f, int64_t h, int64_t) {
        return float(h - 3.5) * (f % 2 ? 1.f : -1.f);
      }));
  EXPECT_GT(moving.motion, 1.5);
  // A checkerboard: all detail.
  const ContentMeasures checker = content_measures(
      latent_of(5, 8, 8, [](int64_t, int64_t h, int64_t w) { return (h + w) % 2 ? 1.f : -1.f; }));
  EXPECT_GT(checker.detail, 0.8);
  EXPECT_DOUBLE_EQ(checker.motion, 0.0);
  // Two frames: no pair after frame 0.
  EXPECT_TRUE(std::isinf(content_measures(latent_of(2, 4, 4, [](int64_t, int64_t h, int64_t) {
                           return float(h);
                         })).motion));
}

TEST(Dvg, AutoChoosesFromTheProbeAndRecordsIt) {
  VIDAX_REQUIRE_TINY_LOOP();
  RunInfo run = tiny::tiny_run_info(10);
  run.latent = {3, 4, 6};
  // Thresholds no content passes: neither reduction, the probe switches to the full grid.
  auto none = make_dvg("probe=0.2,switch=0.6,motion=0,detail=0", run);
  std::vector<Tensor> got = tiny::tiny_loop_latents(none.get(), 10);
  StepReport r = none->report();
  EXPECT_EQ(r.details["choice"], "full");
  EXPECT_EQ(r.schedule_cond, "rrCCCCCCCC");
  EXPECT_TRUE(r.details.contains("motion") && r.details.contains("detail"));
  EXPECT_FALSE(none->planned_report().has_value());  // chosen at run time
  // Only space (the probe's two frames cannot show motion, so time is kept): the probe's 2
  // frames become 3 at the reduced height and width.
  auto space = make_dvg("probe=0.2,switch=0.6,motion=1e9,detail=1e9", run);
  got = tiny::tiny_loop_latents(space.get(), 10);
  r = space->report();
  EXPECT_EQ(r.details["choice"], "space");
  EXPECT_EQ(grid_of(got[2]), (LatentGrid{3, 2, 4}));
  EXPECT_EQ(grid_of(got.back()), (LatentGrid{3, 4, 6}));
  EXPECT_EQ(r.details["stages"].size(), 3u);
}

TEST(Dvg, ChoiceFollowsTheThresholds) {
  const ContentMeasures m{0.3, 0.2};
  EXPECT_EQ(choose_reduction(m, 0.5, 0.5, true, true), "joint");
  EXPECT_EQ(choose_reduction(m, 0.5, 0.1, true, true), "time");
  EXPECT_EQ(choose_reduction(m, 0.1, 0.5, true, true), "space");
  EXPECT_EQ(choose_reduction(m, 0.1, 0.1, true, true), "full");
  EXPECT_EQ(choose_reduction(m, 0.5, 0.5, false, true), "space");  // one latent frame
  EXPECT_EQ(choose_reduction({INFINITY, 0.2}, 1e9, 0.5, true, true), "space");
}

TEST(Dvg, BadSpecsNameTheOption) {
  VIDAX_REQUIRE_TINY_LOOP();
  const RunInfo run = tiny::tiny_run_info(10);
  const auto message = tiny::spec_error;
  EXPECT_NE(message("dvg:mode=fast", run).find("mode='fast'"), std::string::npos);
  EXPECT_NE(message("dvg:switch=1", run).find("switch"), std::string::npos);
  EXPECT_NE(message("dvg:scale=0", run).find("scale"), std::string::npos);
  EXPECT_NE(message("dvg:shift=0", run).find("shift"), std::string::npos);
  EXPECT_NE(message("dvg:when=now", run).find("when"), std::string::npos);
  RunInfo i2v = run;
  i2v.image_conditioned = true;
  EXPECT_NE(message("dvg", i2v).find("text-to-video only"), std::string::npos);
}

}  // namespace
}  // namespace vidax::accel
