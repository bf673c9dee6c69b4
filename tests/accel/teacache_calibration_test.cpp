// TeaCache's polynomial fit for new models: the least-squares degree-4 fit (numpy.polyfit order)
// recovers a known polynomial and matches a hand-checked noisy case, a calibration run on the
// tiny model changes nothing and records a pair per consecutive call, and the table file drives
// --accel teacache:table=FILE (with its mode checked).
#include <cmath>
#include <fstream>
#include <vector>

#include "accel/step_method.h"
#include "accel/teacache.h"
#include "accel/teacache_calibration.h"
#include "accel/tiny_loop.h"
#include "core/error.h"
#include "support/test_support.h"

namespace vidax::accel {
namespace {

TEST(TeaCacheCalibration, PolyfitRecoversAPolynomial) {
  const std::array<double, 5> truth = {2.5, -1.25, 0.5, 3.0, -0.125};
  std::vector<double> x, y;
  for (int i = 0; i < 40; ++i) {
    const double v = 0.05 + 0.02 * i;  // 0.05 .. 0.83, as relative L1 changes are
    double p = 0;
    for (double c : truth) p = p * v + c;
    x.push_back(v);
    y.push_back(p);
  }
  const std::array<double, 5> got = polyfit4(x, y);
  for (size_t k = 0; k < 5; ++k) EXPECT_NEAR(got[k], truth[k], 1e-8) << k;
  // A line through noisy points: the least-squares line is 2x + 1 for symmetric noise.
  std::vector<double> lx, ly;
  for (int i = 0; i < 9; ++i) {
    lx.push_back(i);
    ly.push_back(2.0 * i + 1 + (i % 2 ? 0.5 : -0.5) * (i == 4 ? 0 : 1));
  }
  const std::array<double, 5> line = polyfit4(lx, ly);
  double at5 = 0;
  for (double c : line) at5 = at5 * 5 + c;
  EXPECT_NEAR(at5, 11.0, 0.6);  // a quartic through +-0.5 noise stays near the line
  EXPECT_THROW(polyfit4({1, 2, 3, 4}, {1, 2, 3, 4}), InputError);  // fewer than 5 distinct x
}

TEST(TeaCacheCalibration, ARunRecordsPairsChangesNothingAndFeedsTheMethod) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const Tensor dense = tiny::tiny_loop_latents(nullptr, 8).back();
  const RunInfo info = tiny::tiny_run_info(8);
  auto pairs = std::make_shared<TeaCachePairs>();
  auto method = make_teacache_calibration(info, false, pairs);
  EXPECT_TRUE(vidax::testing::all_close(tiny::tiny_loop_latents(method.get(), 8).back(), dense, 0,
                                        0, "calibration run"));
  ASSERT_EQ(pairs->x.size(), 14u);  // 7 consecutive pairs per branch
  for (size_t i = 0; i < pairs->x.size(); ++i) {
    EXPECT_GT(pairs->x[i], 0.0);
    EXPECT_GT(pairs->y[i], 0.0);
  }
  const std::array<double, 5> c = polyfit4(pairs->x, pairs->y);
  vidax::testing::TempDir dir;
  write_teacache_table(dir.file("t.json"), c, false, pairs->x.size(), R"({"test": true})");
  const auto [read, e0] = read_teacache_table(dir.file("t.json"));
  EXPECT_EQ(read, c);
  EXPECT_FALSE(e0);
  auto tea = make_step_method("teacache:thresh=0.1,table=" + dir.file("t.json"), info);
  EXPECT_NE(tea->name().find("coeffs="), std::string::npos);
  EXPECT_THROW(make_step_method("teacache:mode=e0,table=" + dir.file("t.json"), info),
               InputError);  // fitted for e
  EXPECT_THROW(make_step_method("teacache:table=" + dir.file("t.json") + ",model=t2v-1.3b", info),
               InputError);
  std::ofstream(dir.file("bad.json"))
      << R"({"method": "teacache", "mode": "e", "coefficients": [1]})";
  EXPECT_THROW(make_step_method("teacache:table=" + dir.file("bad.json"), info), InputError);
}

}  // namespace
}  // namespace vidax::accel
