// The step-method interface without a model: MagCache's schedules for the published tables (the
// call patterns the reference's replay gives, shared/research/step-methods.md section 2.2),
// numpy's nearest interpolation, TeaCache's and EasyCache's skip logic on hand-built inputs, the
// work fraction, the model-family choice and the spec errors.
#include <cmath>
#include <string>
#include <vector>

#include "accel/easycache.h"
#include "accel/magcache.h"
#include "accel/step_method.h"
#include "accel/teacache.h"
#include "core/error.h"
#include "support/test_support.h"

namespace vidax::accel {
namespace {

wan::DitConfig wan21_1_3b() { return *wan::dit_preset("wan2.1-t2v-1.3b"); }

RunInfo run_of(const wan::DitConfig& dit, int steps, int64_t w = 832, int64_t h = 480) {
  RunInfo r;
  r.dit = dit;
  r.steps = steps;
  r.branches = 2;
  r.width = w;
  r.height = h;
  r.tokens = 21 * (h / 16) * (w / 16);
  return r;
}

// 'C' where the conditional branch runs its blocks, '.' where it reuses them.
std::string cond_pattern(const std::vector<std::array<bool, 2>>& s, bool check_uncond_equal) {
  std::string p;
  for (const auto& step : s) {
    p.push_back(step[0] ? 'C' : '.');
    if (check_uncond_equal) {
      EXPECT_EQ(step[0], step[1]);
    }
  }
  return p;
}

TEST(MagCacheSchedule, PublishedTablesGiveTheReferencePatterns) {
  struct Case {
    const char* family;
    int steps;
    double thresh;
    int k;
    const char* pattern;
  };
  const Case cases[] = {
      {"t2v-1.3b", 50, 0.12, 2, "CCCCCCCCCC..C..C..C..C..C..C..C..C..C..C..C.C.C.CC"},
      {"t2v-1.3b", 50, 0.12, 4, "CCCCCCCCCC....C....C....C....C....C...C..C..C.C.CC"},
      {"t2v-14b", 50, 0.24, 6, "CCCCCCCCCC......C......C......C.....C....C..C..C.C"},
      {"i2v-480p", 40, 0.24, 6, "CCCCCCCC......C.....C....C....C...C..C.C"},
      {"i2v-720p", 40, 0.24, 6, "CCCCCCCC......C......C.....C....C..C..C."},
      {"t2v-1.3b", 20, 0.12, 2, "CCCC..C..C..C..C..CC"},  // the 50-step table interpolated
  };
  for (const Case& c : cases) {
    const auto ratios = magcache_published_ratios(c.family);
    ASSERT_TRUE(ratios.has_value()) << c.family;
    const auto s = magcache_schedule(*ratios, c.steps, 2, c.thresh, c.k, 0.2);
    EXPECT_EQ(cond_pattern(s, true), c.pattern) << c.family << " " << c.steps;
  }
  // The published lengths: T2V 50 steps (100 values), I2V 40 (80), starting with [1, 1].
  EXPECT_EQ(magcache_published_ratios("t2v-14b")->size(), 100u);
  EXPECT_EQ(magcache_published_ratios("i2v-720p")->size(), 80u);
  EXPECT_EQ((*magcache_published_ratios("t2v-1.3b"))[2], 1.0124);
  EXPECT_FALSE(magcache_published_ratios("ti2v-5b").has_value());
}

TEST(MagCacheSchedule, NearestInterpRoundsHalfToEvenAsNumpy) {
  const std::vector<double> six = {0, 1, 2, 3, 4, 5};
  // len 6 -> 3: indices round(0), round(2.5) = 2 (half to even), round(5).
  EXPECT_EQ(nearest_interp(six, 3), (std::vector<double>{0, 2, 5}));
  // len 4 -> 3: round(1.5) = 2.
  EXPECT_EQ(nearest_interp({0, 1, 2, 3}, 3), (std::vector<double>{0, 2, 3}));
  EXPECT_EQ(nearest_interp(six, 1), (std::vector<double>{5}));
  EXPECT_EQ(nearest_interp(six, 6), six);
  EXPECT_EQ(nearest_interp({7, 8}, 4), (std::vector<double>{7, 7, 8, 8}));  // 0, .33, .67, 1
}

TEST(MagCacheSchedule, ThresholdKAndRetentionBoundTheSkips) {
  const auto ratios = *magcache_published_ratios("t2v-1.3b");
  // thresh 0: nothing is skipped; retention 1: nothing is skipped.
  for (const auto& s : magcache_schedule(ratios, 50, 2, 0.0, 2, 0.2)) EXPECT_TRUE(s[0] && s[1]);
  for (const auto& s : magcache_schedule(ratios, 50, 2, 1e9, 2, 1.0)) EXPECT_TRUE(s[0] && s[1]);
  // A huge threshold: K skips then one run, from the first step after the retention window.
  const auto s = magcache_schedule(ratios, 50, 2, 1e9, 3, 0.2);
  EXPECT_EQ(cond_pattern(s, true).substr(0, 18), "CCCCCCCCCC...C...C");
  // One branch (no guidance): the window counts steps.
  EXPECT_EQ(cond_pattern(magcache_schedule(ratios, 10, 1, 1e9, 1, 0.2), false), "CC.C.C.C.C");
}

TEST(TeaCacheLogic, AccumulatesRescaledDistanceAndKeepsTheWindows) {
  // identity polynomial: the accumulated distance is the sum of relative L1 changes.
  TeaCache t(run_of(wan21_1_3b(), 6), 0.25, false, {0, 0, 0, 1, 0}, "");
  auto e = [](float v) { return std::vector<float>{v, v}; };
  const std::vector<float> e0(12, 0.f);
  // step 0 always runs (the window); then relative changes 0.1, 0.1, 0.1 -> acc 0.1, 0.2
  // (skip, skip), 0.3 (run); step 5 (the last) always runs.
  const float values[] = {1.0f, 1.1f, 1.21f, 1.331f, 1.4641f, 1.61051f};
  std::string got;
  for (int s = 0; s < 6; ++s) {
    const auto v = e(values[s]);
    got.push_back(t.decide(s, 0, v, e0) ? 'C' : '.');
  }
  EXPECT_EQ(got, "C..C.C");
  EXPECT_NEAR(t.decisions()[1].rel_l1, 0.1, 1e-6);
  EXPECT_NEAR(t.decisions()[2].acc, 0.2, 1e-6);
  EXPECT_EQ(t.decisions()[3].acc, 0.0);  // reset when it runs
  // The branches keep separate state; a model change forces a run.
  const auto v = e(1.7f);
  t.on_model_change();
  EXPECT_TRUE(t.decide(4, 1, v, e0));
}

TEST(EasyCacheLogic, SkipsOnceTheRateIsKnownAndReusesTheTransformation) {
  RunInfo run = run_of(wan21_1_3b(), 6);
  run.branches = 1;
  EasyCache c(run, 0.5, 2);
  auto full = [](float v) { return Tensor::from_floats(std::vector<float>(4, v), Shape{4}); };
  // Steps 0 and 1 run (the window); x moves by 1 per step and v = 2x, so k = 2.
  for (int s = 0; s < 2; ++s) {
    EXPECT_FALSE(c.skip_step(s, full(static_cast<float>(s))));
    c.observe(s, 0, full(static_cast<float>(s)), full(2.0f * s + 1));
  }
  // step 2: pred = k * |dx| / |v_last| = 2 * 1 / 3 = 0.667 > 0.5 -> runs.
  EXPECT_FALSE(c.skip_step(2, full(2)));
  c.observe(2, 0, full(2), full(5));
  // step 3: pred = 2 * 0.1 / 5 = 0.04 -> skipped, output x + (v_last - x_last) = 3.1 + 3.
  EXPECT_TRUE(c.skip_step(3, full(2.1f)));
  EXPECT_NEAR(c.output(3, 0, full(2.1f)).data<float>()[0], 5.1f, 1e-6);
  EXPECT_NEAR(c.decisions()[3].acc, 0.04, 1e-6);
  // the last step always runs.
  EXPECT_FALSE(c.skip_step(5, full(2.2f)));
  EXPECT_EQ(c.report().schedule_cond.substr(3, 1), ".");
}

TEST(StepMethodSpec, WorkFractionCountsTheSkippedBlocks) {
  const RunInfo run = run_of(wan21_1_3b(), 10);
  EXPECT_DOUBLE_EQ(work_fraction(run, 20, 0), 1.0);
  EXPECT_DOUBLE_EQ(work_fraction(run, 0, 0), 0.0);
  const double blocks = wan::WanDit::block_stack_flops(run.dit, run.tokens) /
                        wan::WanDit::forward_flops(run.dit, run.tokens);
  EXPECT_GT(blocks, 0.99);  // embeddings and head are a sliver of a 30-block model
  EXPECT_NEAR(work_fraction(run, 10, 10), 0.5 + 0.5 * (1 - blocks), 1e-12);
}

TEST(StepMethodSpec, FamiliesComeFromTheModelAndTheSize) {
  EXPECT_EQ(published_family("auto", run_of(wan21_1_3b(), 50)), "t2v-1.3b");
  EXPECT_EQ(published_family("auto", run_of(*wan::dit_preset("wan2.1-t2v-14b"), 50)), "t2v-14b");
  const wan::DitConfig i2v = *wan::dit_preset("wan2.1-i2v-14b");
  EXPECT_EQ(published_family("auto", run_of(i2v, 40, 832, 480)), "i2v-480p");
  EXPECT_EQ(published_family("auto", run_of(i2v, 40, 1280, 720)), "i2v-720p");
  EXPECT_EQ(published_family("auto", run_of(*wan::dit_preset("wan2.2-ti2v-5b"), 50)), "");
  EXPECT_EQ(published_family("i2v-720p", run_of(wan21_1_3b(), 50)), "i2v-720p");
}

TEST(StepMethodSpec, CanonicalNamesAndErrorsNamingTheOption) {
  const RunInfo run = run_of(wan21_1_3b(), 50);
  EXPECT_EQ(make_step_method("none", run), nullptr);
  EXPECT_EQ(make_step_method("magcache", run)->name(),
            "magcache:thresh=0.12,k=2,retention=0.2,model=t2v-1.3b");
  EXPECT_EQ(make_step_method("teacache:thresh=0.08", run)->name(),
            "teacache:thresh=0.08,mode=e,model=t2v-1.3b");
  EXPECT_EQ(make_step_method("easycache", run)->name(), "easycache:thresh=0.05,ret=10");
  auto expect_error = [&](const std::string& spec, const std::string& needle, const RunInfo& r) {
    try {
      make_step_method(spec, r);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--accel"), std::string::npos) << e.what();
    }
  };
  expect_error("fastcache", "unknown method 'fastcache'", run);
  expect_error("teacache:thresh=-1", "thresh", run);
  expect_error("teacache:mode=x", "mode=x", run);
  expect_error("teacache:coeffs=1/2/3", "five numbers", run);
  expect_error("teacache:speed=2", "unknown option 'speed'", run);
  expect_error("magcache:k=0", "k=0", run);
  expect_error("magcache:retention=1.5", "retention", run);
  expect_error("magcache:model=t2v-99b", "model=t2v-99b", run);
  expect_error("easycache:thresh=abc", "thresh", run);
  expect_error("none:x=1", "takes no options", run);
  // No published table for a Wan 2.2 TI2V model: the message says how to give one.
  const RunInfo ti2v = run_of(*wan::dit_preset("wan2.2-ti2v-5b"), 50);
  expect_error("teacache", "coeffs=", ti2v);
  expect_error("magcache", "model=", ti2v);
  EXPECT_NE(make_step_method("easycache", ti2v), nullptr);  // needs no table
}

}  // namespace
}  // namespace vidax::accel
