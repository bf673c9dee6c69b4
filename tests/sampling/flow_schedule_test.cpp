#include "sampling/flow_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "io/safetensors.h"
#include "sampling/scheduler.h"
#include "sampling_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::kSchedConfigs;

void expect_schedule_matches(const FlowSchedule& got, const SafetensorsFile& file,
                             const std::string& tag) {
  // clone(): I64 data inside a safetensors file need not be 8-byte aligned.
  const Tensor ts = file.tensor(tag + ".timesteps").clone();
  const Tensor sg = file.tensor(tag + ".sigmas");
  ASSERT_EQ(static_cast<int64_t>(got.timesteps.size()), ts.numel()) << tag;
  ASSERT_EQ(static_cast<int64_t>(got.sigmas.size()), sg.numel()) << tag;
  const int64_t* t = ts.data<int64_t>();
  for (int64_t i = 0; i < ts.numel(); ++i) {
    EXPECT_EQ(got.timesteps[static_cast<size_t>(i)], t[i]) << tag << " timestep " << i;
  }
  const float* s = sg.data<float>();
  int64_t bit_diffs = 0;
  for (int64_t i = 0; i < sg.numel(); ++i) {
    const float g = got.sigmas[static_cast<size_t>(i)];
    EXPECT_NEAR(g, s[i], 1e-7) << tag << " sigma " << i;
    if (std::memcmp(&g, &s[i], sizeof(float)) != 0) ++bit_diffs;
  }
  // Built with numpy's exact operation order, the float32 sigmas are bit-identical.
  EXPECT_EQ(bit_diffs, 0) << tag;
  EXPECT_EQ(got.sigmas.back(), 0.0f);
}

TEST(FlowSchedule, UniPCMatchesReference) {
  VIDAX_REQUIRE_FIXTURE(path, "sched_unipc.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(path);
  for (const auto& c : kSchedConfigs) {
    expect_schedule_matches(unipc_schedule(c.steps, c.shift), file, c.tag);
  }
}

TEST(FlowSchedule, DpmppMatchesReference) {
  VIDAX_REQUIRE_FIXTURE(path, "sched_dpmpp.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(path);
  for (const auto& c : kSchedConfigs) {
    expect_schedule_matches(dpmpp_schedule(c.steps, c.shift), file, c.tag);
  }
}

TEST(FlowSchedule, CfgLoopScheduleMatchesReference) {
  VIDAX_REQUIRE_FIXTURE(path, "cfg_loop_tiny.io.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(path);
  const FlowSchedule s = unipc_schedule(4, 5.0);
  const Tensor ts = file.tensor("timesteps").clone();  // aligned copy of the I64 data
  const Tensor sg = file.tensor("sigmas");
  ASSERT_EQ(ts.numel(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.timesteps[static_cast<size_t>(i)], ts.data<int64_t>()[i]);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sigmas[static_cast<size_t>(i)], sg.data<float>()[i]);
}

TEST(FlowSchedule, FirstTimestepsAndTruncation) {
  // README section 6: the first UniPC timestep is 999, the first DPM++ timestep 1000.
  EXPECT_EQ(unipc_schedule(50, 5.0).timesteps.front(), 999);
  EXPECT_EQ(dpmpp_schedule(50, 5.0).timesteps.front(), 1000);
  EXPECT_EQ(dpmpp_schedule(50, 5.0).sigmas.front(), 1.0f);
  EXPECT_EQ(unipc_schedule(1, 1.0).sigmas.front(), static_cast<float>(kUniPCSigmaMax));
  // Timesteps are truncated, never rounded up: t <= s * 1000 < t + 1.
  for (int steps : {1, 2, 7, 30}) {
    for (double shift : {1.0, 3.0, 5.0, 8.0}) {
      const FlowSchedule s = unipc_schedule(steps, shift);
      ASSERT_EQ(s.timesteps.size(), static_cast<size_t>(steps));
      ASSERT_EQ(s.sigmas.size(), static_cast<size_t>(steps + 1));
      for (int i = 0; i < steps; ++i) {
        const double scaled = static_cast<double>(s.sigmas[static_cast<size_t>(i)]) * 1000.0;
        EXPECT_LE(static_cast<double>(s.timesteps[static_cast<size_t>(i)]), scaled + 1e-3);
        EXPECT_GT(static_cast<double>(s.timesteps[static_cast<size_t>(i)]) + 1.0, scaled - 1e-3);
        if (i > 0) {
          EXPECT_LT(s.sigmas[static_cast<size_t>(i)], s.sigmas[static_cast<size_t>(i - 1)]);
        }
      }
    }
  }
}

TEST(FlowSchedule, NumpyLinspace) {
  const std::vector<double> a = numpy_linspace(1.0, 0.0, 5);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0], 1.0);
  EXPECT_EQ(a[1], 0.75);
  EXPECT_EQ(a[4], 0.0);
  const std::vector<double> one = numpy_linspace(0.3, 7.0, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], 0.3);
  // numpy computes i * step + start: 0.1 * 3 + 0 is 0.30000000000000004, not 0.3.
  const std::vector<double> b = numpy_linspace(0.0, 1.0, 11);
  EXPECT_EQ(b[3], 3 * 0.1);
  EXPECT_EQ(b[10], 1.0);
}

TEST(FlowSchedule, ShiftOfOneIsIdentity) {
  for (double s : {0.0, 0.1, 0.5, 0.999, 1.0}) EXPECT_EQ(shift_sigma(s, 1.0), s);
  EXPECT_DOUBLE_EQ(shift_sigma(0.5, 5.0), 2.5 / 3.0);
}

TEST(FlowSchedule, EulerUsesUniPCSchedule) {
  const FlowSchedule e = euler_schedule(20, 5.0);
  const FlowSchedule u = unipc_schedule(20, 5.0);
  EXPECT_EQ(e.timesteps, u.timesteps);
  EXPECT_EQ(e.sigmas, u.sigmas);
  auto sched = make_scheduler("euler", 20, 5.0);
  EXPECT_EQ(sched->timesteps(), u.timesteps);
  EXPECT_EQ(sched->sigmas(), u.sigmas);
}

}  // namespace
}  // namespace vidax
