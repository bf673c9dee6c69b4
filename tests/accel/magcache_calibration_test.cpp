// MagCache calibration: the per-call magnitude ratio (token-wise L2 norms of the block-stack
// residual), the averaged, rounded table led by [1, 1], a dense calibration run on the tiny model
// that changes nothing in the result, and the table file read back by magcache:ratios=FILE.
#include <cmath>
#include <fstream>
#include <vector>

#include "accel/magcache.h"
#include "accel/magcache_calibration.h"
#include "accel/tiny_loop.h"
#include "core/error.h"
#include "support/test_support.h"

namespace vidax::accel {
namespace {

TEST(MagCacheCalibration, RatioIsTheMeanOfTokenNormRatios) {
  // Two tokens of width 2: norms 5 and 1 against 1 and 2 -> (5 + 0.5) / 2.
  const std::vector<float> r = {3, 4, 1, 0}, prev = {1, 0, 0, 2};
  EXPECT_DOUBLE_EQ(magnitude_ratio(r, prev, 2, 2), 2.75);
}

TEST(MagCacheCalibration, TableAveragesRunsRoundsAndLeadsWithOnes) {
  MagRatioAccumulator acc(3);
  acc.add(1, 0, 0.9);
  acc.add(1, 0, 0.95);
  acc.add(1, 1, 1.0000049);
  acc.add(2, 0, 0.8);
  const std::vector<double> t = acc.ratios();
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0], 1.0);
  EXPECT_EQ(t[1], 1.0);
  EXPECT_DOUBLE_EQ(t[2], 0.925);
  EXPECT_DOUBLE_EQ(t[3], 1.0);  // 1.0000049 rounded to 5 decimals
  EXPECT_DOUBLE_EQ(t[4], 0.8);
  EXPECT_DOUBLE_EQ(t[5], 1.0);  // never measured
}

TEST(MagCacheCalibration, ADenseRunRecordsEveryCallAndChangesNothing) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const Tensor dense = tiny::tiny_loop_latents(nullptr, 6).back();
  const RunInfo info = tiny::tiny_run_info(6);
  auto acc = std::make_shared<MagRatioAccumulator>(6);
  Tensor calibrated;
  {
    auto method = make_magcache_calibration(info, acc);
    calibrated = tiny::tiny_loop_latents(method.get(), 6).back();
    EXPECT_EQ(method->report().schedule_cond, "CCCCCC");
  }
  EXPECT_TRUE(vidax::testing::all_close(calibrated, dense, 0, 0, "calibration run"));
  EXPECT_EQ(acc->runs(), 1);
  const std::vector<double> table = acc->ratios();
  ASSERT_EQ(table.size(), 12u);
  for (size_t i = 2; i < table.size(); ++i) {
    EXPECT_GT(table[i], 0.0) << i;
    EXPECT_NE(table[i], 1.0) << i;  // measured
  }
  // Written, read back, used: the schedule of magcache:ratios=FILE comes from this table.
  vidax::testing::TempDir dir;
  write_magcache_ratios(dir.file("t.json"), table, 6, R"({"test": true})");
  EXPECT_EQ(read_magcache_ratios(dir.file("t.json")), table);
  auto m = make_step_method("magcache:ratios=" + dir.file("t.json") + ",thresh=1e9,k=1", info);
  EXPECT_NE(m->name().find("ratios=" + dir.file("t.json")), std::string::npos);
  const auto planned = m->planned_blocks();
  ASSERT_TRUE(planned.has_value());
  EXPECT_EQ(*planned, magcache_schedule(table, 6, 2, 1e9, 1, 0.2));
}

TEST(MagCacheCalibration, BadTablesAreNamed) {
  vidax::testing::TempDir dir;
  RunInfo info;
  info.steps = 4;
  auto message = [&](const std::string& text) {
    std::ofstream(dir.file("bad.json")) << text;
    try {
      make_step_method("magcache:ratios=" + dir.file("bad.json"), info);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("{").find("not a MagCache table"), std::string::npos);
  EXPECT_NE(message(R"({"method": "magcache", "ratios": [1, 1, -2, 1]})").find("ratio 2"),
            std::string::npos);
  EXPECT_NE(message(R"({"method": "magcache", "ratios": [1, 1, 1]})").find("pairs"),
            std::string::npos);
  EXPECT_THROW(make_step_method("magcache:ratios=" + dir.file("none.json"), info), InputError);
  EXPECT_THROW(make_step_method("magcache:ratios=x,model=t2v-1.3b", info), InputError);
}

}  // namespace
}  // namespace vidax::accel
