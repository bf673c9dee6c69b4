// The DiT with attention policies: the dense policy is bit-identical to no policy; a window that
// covers the whole grid equals dense up to f32 rounding; a small window changes the output but
// stays finite; diagnostics record one entry per layer with the call's step and branch.
#include <gtest/gtest.h>

#include <cmath>

#include "models/dit_policy_test_util.h"
#include "models/wan/dit.h"
#include "models/wan/dit_random.h"
#include "sparse/attention_policy.h"
#include "sparse/sparse_attention.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using ::vidax::testing::all_close;

DitConfig small_config() { return testing::small_policy_config(); }
DitSample sample() { return testing::small_policy_sample(1); }

TEST(WanDitAttention, DensePolicyIsBitIdenticalAndFullWindowMatches) {
  const DitConfig c = small_config();
  const auto weights = random_dit_weights(c, DType::kF32, 3);
  for (const Precision p : {Precision::kFP32, Precision::kBF16}) {
    WanDit model(c, weights, p);
    const Tensor ref = model.forward(sample());
    model.set_attention(sparse::make_attention_policy("dense"));
    EXPECT_TRUE(all_close(model.forward(sample()), ref, 0, 0, "dense policy"));
    // Window and tile larger than the grid: every tile FULL, a permuted 3D layout.
    model.set_attention(sparse::make_attention_policy("window:4,6,8:tile=2,2,4"));
    // bf16: the key order differs, and a last-bit difference of the attention output can flip a
    // bf16 rounding of the next GEMM's input (1e-4 fails here, max error 1e-2).
    const double tol = p == Precision::kFP32 ? 1e-5 : 2e-2;
    EXPECT_TRUE(all_close(model.forward(sample()), ref, tol, tol, "covering window"));
    model.set_attention(sparse::make_attention_policy("window:1,2,2:tile=1,2,2:sink"));
    const Tensor windowed = model.forward(sample());
    double diff = 0;
    const auto a = windowed.to_float_vector(), r = ref.to_float_vector();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(std::isfinite(a[i]));
      diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - r[i]));
    }
    EXPECT_GT(diff, 1e-4) << "a small window should change the output";
  }
}

TEST(WanDitAttention, DiagnosticsRecordEveryLayer) {
  const DitConfig c = small_config();
  WanDit model(c, random_dit_weights(c, DType::kF32, 3), Precision::kFP32);
  sparse::AttentionDiagnostics diag;
  model.set_attention(sparse::make_attention_policy("dense@layers=0;window:1,2,2:tile=1,2,2"),
                      &diag);
  model.forward(sample());
  ASSERT_EQ(diag.records.size(), 2u);
  EXPECT_EQ(diag.records[0].layer, 0);
  EXPECT_EQ(diag.records[1].layer, 1);
  EXPECT_EQ(diag.records[1].step, 4);
  EXPECT_EQ(diag.records[1].cfg_branch, 1);
  EXPECT_DOUBLE_EQ(diag.records[0].density, 1.0);
  EXPECT_EQ(diag.records[0].rel_l2, 0.0);
  EXPECT_LT(diag.records[1].density, 0.5);
  EXPECT_GT(diag.records[1].rel_l2, 0.0);
  EXPECT_LT(diag.records[1].recall, 1.0);
}

}  // namespace
}  // namespace vidax::wan
