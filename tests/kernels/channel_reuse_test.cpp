// channel_group_update / channel_sumsq against a plain loop on ragged shapes: the moved groups,
// the reference update, the per-channel sums (the same for 1 and 2 threads).
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/channel_reuse.h"
#include "support/test_support.h"

namespace vidax {
namespace {

TEST(ChannelReuse, MatchesAPlainLoop) {
  std::mt19937 rng(4);
  std::normal_distribution<float> d(0.f, 1.f);
  for (const auto& [rows, k] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {40, 64}, {65, 100}}) {
    const int64_t groups = (k + 31) / 32;
    std::vector<BFloat16> x(static_cast<size_t>(rows * k)), ref(x.size());
    std::vector<float> limit(static_cast<size_t>(k));
    for (auto& v : x) v.bits = f32_to_bf16(d(rng));
    for (size_t i = 0; i < ref.size(); ++i)  // about half the values move a little
      ref[i].bits = f32_to_bf16(bf16_to_f32(x[i].bits) + (i % 2 ? 0.f : 0.3f * d(rng)));
    for (auto& v : limit) v = 0.2f;
    // The plain loop.
    std::vector<uint8_t> want_changed(static_cast<size_t>(rows * groups));
    std::vector<BFloat16> want_ref = ref;
    std::vector<double> want_sum(static_cast<size_t>(k), 0.0);
    int64_t want_still = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        bool moved = false;
        for (int64_t c = g * 32; c < std::min(k, g * 32 + 32); ++c) {
          const size_t i = static_cast<size_t>(r * k + c);
          moved |= std::fabs(bf16_to_f32(x[i].bits) - bf16_to_f32(ref[i].bits)) > 0.2f;
        }
        want_changed[static_cast<size_t>(r * groups + g)] = moved;
        want_still += !moved;
        for (int64_t c = g * 32; c < std::min(k, g * 32 + 32); ++c) {
          const size_t i = static_cast<size_t>(r * k + c);
          if (moved) want_ref[i] = x[i];
        }
      }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const double v = bf16_to_f32(x[static_cast<size_t>(r * k + c)].bits);
        want_sum[static_cast<size_t>(c)] += v * v;
      }
    std::vector<float> sums[2];
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<BFloat16> got_ref = ref;
      std::vector<uint8_t> changed(want_changed.size());
      std::vector<float>& sum = sums[threads - 1];
      sum.assign(static_cast<size_t>(k), 0.f);
      const int64_t still = channel_group_update(x.data(), got_ref.data(), rows, k, limit.data(),
                                                 changed.data(), sum.data());
      EXPECT_EQ(still, want_still);
      EXPECT_EQ(changed, want_changed);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got_ref[i].bits, want_ref[i].bits) << i;
      for (int64_t c = 0; c < k; ++c)
        EXPECT_NEAR(sum[static_cast<size_t>(c)], want_sum[static_cast<size_t>(c)],
                    1e-4 * (1 + want_sum[static_cast<size_t>(c)]));
      std::vector<float> alone(static_cast<size_t>(k));
      channel_sumsq(x.data(), rows, k, alone.data());
      EXPECT_EQ(alone, sum);
    }
    EXPECT_EQ(sums[0], sums[1]);  // thread-count independent
    omp_set_num_threads(omp_get_num_procs());
  }
}

}  // namespace
}  // namespace vidax
