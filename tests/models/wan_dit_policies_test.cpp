// Sparse VideoGen, SPADE and WEST inside the DiT (random weights, 3 x 5 x 7 tokens): each plans
// every self-attention call, the executor runs it, the output stays finite and close to dense,
// and the diagnostics show the density the policy chose.
#include <gtest/gtest.h>

#include <cmath>

#include "models/dit_policy_test_util.h"
#include "models/wan/dit.h"
#include "models/wan/dit_random.h"
#include "sparse/attention_policy.h"
#include "sparse/sparse_attention.h"
#include "sparse/west_policy.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

DitConfig small_config() { return testing::small_policy_config(); }
DitSample sample() { return testing::small_policy_sample(0); }

TEST(WanDitPolicies, SvgSpadeAndWestRunInTheDit) {
  const DitConfig c = small_config();
  WanDit model(c, random_dit_weights(c, DType::kF32, 3), Precision::kFP32);
  const auto ref = model.forward(sample()).to_float_vector();
  // A WEST prior recorded from this model's own dense calls.
  auto recorder = std::make_shared<sparse::WestRecorder>(std::array<int64_t, 3>{2, 2, 2}, 0, 0);
  model.set_attention(recorder);
  model.forward(sample());
  vidax::testing::TempDir dir;
  sparse::write_west_prior(dir.file("p.west"), recorder->accumulator().prior());
  for (const std::string& spec : {std::string("svg:density=0.4,block=8,warmup=0,warmup_layers=0"),
                                  std::string("spade:topp=0.7,dense_layers=0"),
                                  "west:" + dir.file("p.west") + ":budget=0.3,block=1x2x4"}) {
    sparse::AttentionDiagnostics diag;
    model.set_attention(sparse::make_attention_policy(spec), &diag);
    const auto out = model.forward(sample()).to_float_vector();
    ASSERT_EQ(diag.records.size(), 2u) << spec;
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(out[i])) << spec;
      num += (out[i] - ref[i]) * (out[i] - ref[i]);
      den += static_cast<double>(ref[i]) * ref[i];
    }
    for (const auto& r : diag.records) {
      EXPECT_LT(r.density, 1.0) << spec << " layer " << r.layer;
      EXPECT_GT(r.recall, 0.0) << spec;
    }
    EXPECT_LT(std::sqrt(num / den), 0.5) << spec;  // sparse, not broken
  }
}

}  // namespace
}  // namespace vidax::wan
