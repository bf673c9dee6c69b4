#include "sampling/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "sampling_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::all_close;
using testing::count_bit_differences;
using testing::ErrorStats;
using testing::kSchedAtol;
using testing::kSchedConfigs;
using testing::kSchedRtol;

// The toy flow model of the fixture README 5.8, float32 in the reference's order:
// s = float32(t) / 1000; v = ((0.7 * x) - ((0.3 * tanh(x)) * s)) + 0.1.
Tensor toy_model(const Tensor& x, int64_t t) {
  const float s = static_cast<float>(t) / 1000.0f;
  Tensor v = Tensor::zeros(x.shape(), DType::kF32);
  const float* xs = x.data<float>();
  float* o = v.mutable_data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float a = 0.7f * xs[i];
    const float th = std::tanh(xs[i]);
    const float b = 0.3f * th;
    const float bs = b * s;
    const float d = a - bs;
    o[i] = d + 0.1f;
  }
  return v;
}

// Feeds the stored model_out[i] at the stored x[i] into step i and compares x[i+1], x0_pred[i]
// and (UniPC) corrected_sample[i-1] with the reference at the README tolerance.
void check_open_loop(const std::string& sampler, const std::string& fixture) {
  VIDAX_REQUIRE_FIXTURE(path, fixture);
  const SafetensorsFile file = SafetensorsFile::open(path);
  for (const auto& c : kSchedConfigs) {
    SCOPED_TRACE(sampler + " " + c.tag);
    const std::string tag = c.tag;
    auto sched = make_scheduler(sampler, c.steps, c.shift);
    const Tensor xs = file.tensor(tag + ".x");
    const Tensor vs = file.tensor(tag + ".model_out");
    const bool has_x0 = file.contains(tag + ".x0_pred");
    const bool has_corr = file.contains(tag + ".corrected_sample");
    ErrorStats x_stats, x0_stats, corr_stats;
    for (int i = 0; i < c.steps; ++i) {
      const Tensor next = sched->step(vs.select(0, i), xs.select(0, i));
      const Tensor ref = xs.select(0, i + 1);
      ASSERT_TRUE(
          all_close(next, ref, kSchedAtol, kSchedRtol, tag + " x[" + std::to_string(i + 1) + "]"));
      x_stats.add(next, ref);
      if (has_x0) {
        const Tensor ref_x0 = file.tensor(tag + ".x0_pred").select(0, i);
        ASSERT_TRUE(all_close(sched->last_x0_pred(), ref_x0, kSchedAtol, kSchedRtol,
                              tag + " x0_pred[" + std::to_string(i) + "]"));
        x0_stats.add(sched->last_x0_pred(), ref_x0);
      }
      if (has_corr && i > 0) {
        const Tensor ref_c = file.tensor(tag + ".corrected_sample").select(0, i - 1);
        ASSERT_TRUE(sched->last_corrected_sample().defined());
        ASSERT_TRUE(all_close(sched->last_corrected_sample(), ref_c, kSchedAtol, kSchedRtol,
                              tag + " corrected_sample[" + std::to_string(i - 1) + "]"));
        corr_stats.add(sched->last_corrected_sample(), ref_c);
      }
    }
    EXPECT_TRUE(sched->done());
    // Same float32 operations in the same order, and torch's own log/exp/expm1: bit-identical.
    EXPECT_EQ(x_stats.differing, 0) << "x: " << x_stats.str();
    EXPECT_EQ(x0_stats.differing, 0) << "x0_pred: " << x0_stats.str();
    EXPECT_EQ(corr_stats.differing, 0) << "corrected_sample: " << corr_stats.str();
    std::printf("[ %s %s ] x: %s\n", sampler.c_str(), c.tag, x_stats.str().c_str());
    if (has_x0)
      std::printf("[ %s %s ] x0_pred: %s\n", sampler.c_str(), c.tag, x0_stats.str().c_str());
    if (has_corr) {
      std::printf("[ %s %s ] corrected_sample: %s\n", sampler.c_str(), c.tag,
                  corr_stats.str().c_str());
    }
  }
}

// Runs the toy model in closed loop from x0 and compares the whole trajectory. The toy model's
// tanh (glibc here, SLEEF in the reference) differs in the last bit for some inputs, so this
// trajectory is close to the reference, not bit-identical.
void check_closed_loop(const std::string& sampler, const std::string& fixture) {
  VIDAX_REQUIRE_FIXTURE(path, fixture);
  const SafetensorsFile file = SafetensorsFile::open(path);
  const Tensor start = file.tensor("x0");
  for (const auto& c : kSchedConfigs) {
    SCOPED_TRACE(sampler + " " + c.tag);
    const std::string tag = c.tag;
    auto sched = make_scheduler(sampler, c.steps, c.shift);
    const Tensor xs = file.tensor(tag + ".x");
    const Tensor vs = file.tensor(tag + ".model_out");
    Tensor x = start.clone();
    ErrorStats x_stats, v_stats;
    for (int i = 0; i < c.steps; ++i) {
      const Tensor v = toy_model(x, sched->timesteps()[static_cast<size_t>(i)]);
      v_stats.add(v, vs.select(0, i));
      x = sched->step(v, x);
      const Tensor ref = xs.select(0, i + 1);
      ASSERT_TRUE(all_close(x, ref, kSchedAtol, kSchedRtol,
                            tag + " closed-loop x[" + std::to_string(i + 1) + "]"));
      x_stats.add(x, ref);
    }
    std::printf("[ %s %s closed loop ] x: %s; model_out: %s\n", sampler.c_str(), c.tag,
                x_stats.str().c_str(), v_stats.str().c_str());
  }
}

TEST(UniPC, OpenLoopMatchesReference) { check_open_loop("unipc", "sched_unipc.safetensors"); }
TEST(Dpmpp, OpenLoopMatchesReference) { check_open_loop("dpm++", "sched_dpmpp.safetensors"); }
TEST(UniPC, ClosedLoopToyModelMatchesReference) {
  check_closed_loop("unipc", "sched_unipc.safetensors");
}
TEST(Dpmpp, ClosedLoopToyModelMatchesReference) {
  check_closed_loop("dpm++", "sched_dpmpp.safetensors");
}

// The text2video CFG loop fixture: UniPC, 4 steps, shift 5, fed the stored guided predictions.
TEST(UniPC, CfgLoopLatentsMatchReference) {
  VIDAX_REQUIRE_FIXTURE(path, "cfg_loop_tiny.io.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(path);
  auto sched = make_scheduler("unipc", 4, 5.0);
  Tensor latent = file.tensor("noise");
  ErrorStats stats;
  for (int i = 0; i < 4; ++i) {
    const std::string p = "step" + std::to_string(i) + ".";
    latent = sched->step(file.tensor(p + "noise_pred"), latent);
    ASSERT_TRUE(all_close(latent, file.tensor(p + "latent"), kSchedAtol, kSchedRtol, p + "latent"));
    stats.add(latent, file.tensor(p + "latent"));
  }
  EXPECT_TRUE(all_close(latent, file.tensor("final_latent"), kSchedAtol, kSchedRtol, "final"));
  EXPECT_EQ(stats.differing, 0) << stats.str();
  std::printf("[ unipc cfg_loop_tiny ] latent: %s\n", stats.str().c_str());
}

// Property of both multistep solvers: the last step lands on sigma = 0 through the infinities
// (lambda = +inf, expm1(-inf) = -1) and returns the data prediction exactly.
TEST(Schedulers, LastStepReturnsDataPrediction) {
  for (const std::string name : {"unipc", "dpm++", "euler"}) {
    SCOPED_TRACE(name);
    for (int steps : {1, 2, 3, 6}) {
      auto sched = make_scheduler(name, steps, 3.0);
      Tensor x = testing::random_tensor(Shape{2, 3, 5}, 7);
      for (int i = 0; i < steps; ++i) {
        const Tensor v = testing::random_tensor(Shape{2, 3, 5}, 100 + static_cast<uint32_t>(i));
        x = sched->step(v, x);
        for (float f : x.to_float_vector()) ASSERT_TRUE(std::isfinite(f)) << "step " << i;
      }
      EXPECT_EQ(count_bit_differences(x, sched->last_x0_pred()), 0) << steps << " steps";
    }
  }
}

// DPM++ starts at sigma = 1 (lambda = -inf): the first step is x1 = s1 * x + (1 - s1) * x0
// and the second step's r0 is +inf, so its D1 term vanishes.
TEST(Dpmpp, InfinitiesAtSigmaOne) {
  auto sched = make_scheduler("dpm++", 4, 1.0);
  ASSERT_EQ(sched->sigmas()[0], 1.0f);
  const float s1 = sched->sigmas()[1];
  const Tensor x = Tensor::from_floats(std::vector<float>{0.5f, -1.25f, 2.0f}, Shape{3});
  const Tensor v = Tensor::from_floats(std::vector<float>{0.25f, 0.75f, -1.5f}, Shape{3});
  const Tensor out = sched->step(v, x);
  const std::vector<float> o = out.to_float_vector();
  const std::vector<float> xv = x.to_float_vector();
  const std::vector<float> vv = v.to_float_vector();
  for (int i = 0; i < 3; ++i) {
    const float x0 = xv[i] - 1.0f * vv[i];
    const float expected = s1 * xv[i] - (1.0f - s1) * -1.0f * x0;
    EXPECT_FLOAT_EQ(o[i], expected);
  }
  const Tensor out2 = sched->step(v, out);
  for (float f : out2.to_float_vector()) EXPECT_TRUE(std::isfinite(f));
}

// Euler against a hand computation: x_{i+1} = x_i + (sigma_{i+1} - sigma_i) * v_i.
TEST(Euler, MatchesHandComputation) {
  auto sched = make_scheduler("euler", 3, 5.0);
  const std::vector<float>& s = sched->sigmas();
  ASSERT_EQ(s.size(), 4u);
  // Sigmas by hand: linspace(0.999.., 0, 4)[:-1] shifted by 5 (double), then float.
  const double smax = 0.9990000128746033;
  const double u[3] = {smax, smax - smax / 3, smax - 2 * smax / 3};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(s[static_cast<size_t>(i)], 5 * u[i] / (1 + 4 * u[i]), 1e-7);
  }
  EXPECT_EQ(s[3], 0.0f);
  EXPECT_EQ(sched->timesteps()[0], 999);

  std::vector<float> x = {1.0f, -2.0f, 0.5f, 3.0f};
  Tensor xt = Tensor::from_floats(x, Shape{2, 2});
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> v = {0.1f * static_cast<float>(i + 1), -0.3f, 0.25f, 1.5f};
    xt = sched->step(Tensor::from_floats(v, Shape{2, 2}), xt);
    const float dt = s[static_cast<size_t>(i + 1)] - s[static_cast<size_t>(i)];
    for (size_t k = 0; k < 4; ++k) x[k] = x[k] + dt * v[k];
    EXPECT_EQ(count_bit_differences(xt, Tensor::from_floats(x, Shape{2, 2})), 0) << "step " << i;
  }
  // After the last step sigma is 0; total displacement is -sigma_0 * v for a constant v.
  auto s2 = make_scheduler("euler", 4, 3.0);
  Tensor y = Tensor::from_floats(std::vector<float>{2.0f}, Shape{1});
  const Tensor c = Tensor::from_floats(std::vector<float>{1.0f}, Shape{1});
  for (int i = 0; i < 4; ++i) y = s2->step(c, y);
  EXPECT_NEAR(y.to_float_vector()[0], 2.0f - s2->sigmas()[0], 1e-6);
}

TEST(Schedulers, AcceptsAnyShapeAndNonContiguousInputs) {
  for (const std::string name : {"unipc", "dpm++", "euler"}) {
    SCOPED_TRACE(name);
    auto a = make_scheduler(name, 5, 5.0);
    auto b = make_scheduler(name, 5, 5.0);
    Tensor xa = testing::random_tensor(Shape{4, 3, 2}, 1);
    Tensor xb = xa.permute({2, 0, 1}).contiguous().permute({1, 2, 0});  // same values, strided
    ASSERT_FALSE(xb.is_contiguous());
    for (int i = 0; i < 5; ++i) {
      const Tensor v = testing::random_tensor(Shape{4, 3, 2}, 50 + static_cast<uint32_t>(i));
      const Tensor vb = v.permute({2, 0, 1}).contiguous().permute({1, 2, 0});
      xa = a->step(v, xa);
      xb = b->step(vb, xb);
      EXPECT_EQ(count_bit_differences(xa, xb), 0) << "step " << i;
    }
  }
}

TEST(Schedulers, NamesAndCounters) {
  auto sched = make_scheduler("unipc", 2, 5.0);
  EXPECT_EQ(sched->steps(), 2);
  EXPECT_EQ(sched->step_index(), 0);
  EXPECT_FALSE(sched->done());
  EXPECT_EQ(sched->name(), "unipc");
  EXPECT_EQ(make_scheduler("dpm++", 2, 5.0)->name(), "dpm++");
  EXPECT_EQ(make_scheduler("dpmpp", 2, 5.0)->name(), "dpm++");
  EXPECT_EQ(make_scheduler("euler", 2, 5.0)->name(), "euler");
}

TEST(Schedulers, BadArgumentsAreInputErrors) {
  auto expect_error = [](const std::string& name, int steps, double shift,
                         const std::string& needle) {
    try {
      (void)make_scheduler(name, steps, shift);
      ADD_FAILURE() << "no error for " << name << " " << steps << " " << shift;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("ddim", 10, 5.0, "'ddim'");
  expect_error("", 10, 5.0, "sampler");
  expect_error("UniPC", 10, 5.0, "unipc, dpm++ or euler");
  expect_error("unipc", 0, 5.0, "got 0");
  expect_error("dpm++", -3, 5.0, "got -3");
  expect_error("euler", 10, 0.0, "got 0");
  expect_error("unipc", 10, -1.5, "got -1.5");
  expect_error("unipc", 10, std::nan(""), "shift");
  expect_error("unipc", 10, INFINITY, "shift");
}

}  // namespace
}  // namespace vidax
