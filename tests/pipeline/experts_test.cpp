// Wan 2.2 A14B's two experts: the step-by-step choice of denoise_experts equals the official
// rule (wan/text2video.py: the high-noise expert while the int64 timestep is >= boundary x 1000,
// with guide_scale[1], else the low-noise one with guide_scale[0]) computed here from the official
// timestep formula; the loop equals a hand-written loop switching the same two models bit for
// bit; each expert is made once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "io/safetensors.h"
#include "models/wan/dit_checkpoint.h"
#include "pipeline/denoise.h"
#include "sampling/scheduler.h"
#include "support/test_support.h"

namespace vidax {
namespace {

// The official schedule (fm_solvers_unipc.py set_timesteps): sigmas = linspace(0.999, 0,
// steps + 1)[:-1], shifted s*sigma / (1 + (s - 1) * sigma), timesteps = (sigma * 1000) as int64.
std::vector<int64_t> official_timesteps(int steps, double shift) {
  std::vector<int64_t> t;
  for (int i = 0; i < steps; ++i) {
    const double sigma = 0.999 + (0.0 - 0.999) * i / steps;
    const double shifted = shift * sigma / (1 + (shift - 1) * sigma);
    t.push_back(static_cast<int64_t>(shifted * 1000));
  }
  return t;
}

TEST(Experts, TheOfficialBoundariesSplitTheDefaultSchedules) {
  struct Case {
    double shift, boundary;
    int high_steps;  // from the official rule on the official timesteps
  };
  // T2V A14B: 40 steps, shift 12, boundary 0.875; I2V A14B: 40 steps, shift 5, boundary 0.900.
  for (const Case& c : {Case{12.0, 875.0, 26}, Case{5.0, 900.0, 15}}) {
    DitExperts e;
    e.boundary = c.boundary;
    const auto sched = make_scheduler("unipc", 40, c.shift);
    const auto official = official_timesteps(40, c.shift);
    int high = 0;
    for (int i = 0; i < 40; ++i) {
      const int64_t t = sched->timesteps()[static_cast<size_t>(i)];
      // Within one of the official int64 values (the float formula's truncation may differ by
      // one at a boundary of the double / float32 evaluation), and the same expert.
      EXPECT_NEAR(static_cast<double>(t), static_cast<double>(official[static_cast<size_t>(i)]),
                  1.0)
          << "step " << i;
      EXPECT_EQ(e.expert_for(t),
                static_cast<double>(official[static_cast<size_t>(i)]) >= c.boundary ? 0 : 1)
          << "step " << i << " t " << t;
      high += e.expert_for(t) == 0;
    }
    EXPECT_EQ(high, c.high_steps) << "shift " << c.shift;
  }
}

TEST(Experts, TheLoopSwitchesOnceAndEqualsAHandWrittenLoop) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(loop_path, "cfg_loop_tiny.io.safetensors");
  const auto ck = std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(weights));
  ck->require_loadable();
  // The high-noise expert: the fixture's weights; the low-noise one: the same scaled by 0.9
  // (another network of the same shape).
  const wan::WeightFn high_w = ck->loader();
  const wan::WeightFn low_w = [ck](const std::string& n) {
    std::vector<float> v = ck->get(n).to_float_vector();
    for (float& x : v) x *= 0.9f;
    return Tensor::from_floats(v, ck->get(n).shape());
  };
  const wan::DitConfig& cfg = ck->config();
  const auto io = SafetensorsFile::open(loop_path);
  const Tensor noise = io.tensor("noise"), context = io.tensor("context"),
               context_null = io.tensor("context_null");
  const int64_t seq_len = io.tensor("seq_len").contiguous().data<int64_t>()[0];
  DenoiseOptions opt;
  opt.steps = 12;
  opt.shift = 12.0;

  int made_high = 0, made_low = 0;
  DitExperts experts;
  experts.boundary = 875;
  experts.guide_high = 4.0;
  experts.guide_low = 3.0;
  experts.make_high = [&] {
    ++made_high;
    return std::make_unique<wan::WanDit>(cfg, high_w, wan::Precision::kFP32);
  };
  experts.make_low = [&] {
    ++made_low;
    return std::make_unique<wan::WanDit>(cfg, low_w, wan::Precision::kFP32);
  };
  std::vector<int> chosen;
  std::vector<double> guides;
  const Tensor got = denoise_experts(experts, noise, context, context_null, seq_len, opt,
                                     [&](const DenoiseStep& s) {
                                       chosen.push_back(s.expert);
                                       guides.push_back(s.guide_scale);
                                     });
  EXPECT_EQ(made_high, 1);
  EXPECT_EQ(made_low, 1);

  // The hand-written loop: the official rule on this schedule, the two models side by side.
  wan::WanDit high(cfg, high_w, wan::Precision::kFP32), low(cfg, low_w, wan::Precision::kFP32);
  auto sched = make_scheduler(opt.sampler, opt.steps, opt.shift);
  Tensor latent = noise.to(DType::kF32);
  int switches = 0;
  for (int i = 0; i < opt.steps; ++i) {
    const int64_t t = sched->timesteps()[static_cast<size_t>(i)];
    const bool is_high = static_cast<double>(t) >= 875.0;
    ASSERT_EQ(chosen[static_cast<size_t>(i)], is_high ? 0 : 1) << "step " << i << " t " << t;
    ASSERT_EQ(guides[static_cast<size_t>(i)], is_high ? 4.0 : 3.0) << "step " << i;
    if (i > 0 && chosen[static_cast<size_t>(i)] != chosen[static_cast<size_t>(i - 1)]) ++switches;
    wan::DitSample s;
    s.x = latent;
    s.t = Tensor::zeros(Shape{1}, DType::kI64);
    s.t.mutable_data<int64_t>()[0] = t;
    s.seq_len = seq_len;
    s.step = i;
    s.steps = opt.steps;
    const Tensor pred = guided_prediction(is_high ? high : low, s, context, context_null,
                                          is_high ? 4.0 : 3.0, nullptr);
    latent = sched->step(pred, latent);
  }
  EXPECT_EQ(switches, 1);
  EXPECT_GT(std::count(chosen.begin(), chosen.end(), 0), 0);
  EXPECT_GT(std::count(chosen.begin(), chosen.end(), 1), 0);
  EXPECT_EQ(got.to_float_vector(), latent.to_float_vector());
}

}  // namespace
}  // namespace vidax
