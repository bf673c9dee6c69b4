// umT5 under tensor parallelism: every tp degree the world allows (alone and beside a sequence
// axis), each rank building its shard of the same weights, against the single-process encoder
// on the same rank: random weights with 8 heads (fp32 and bf16, a padded mask), and the official
// fixture (4 heads) against the reference's output.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "dist/mesh.h"
#include "dist/world.h"
#include "io/safetensors.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/t5_random.h"
#include "support/test_support.h"

namespace vidax::dist {
namespace {

// Every mesh ulysses=U, tp=T with U * T = world size and T dividing `heads`.
std::vector<MeshSpec> tp_meshes(int64_t heads) {
  std::vector<MeshSpec> out;
  const int n = world().size();
  for (int t = 2; t <= n; ++t) {
    if (n % t != 0 || heads % t != 0) continue;
    MeshSpec s;
    s.tp = t;
    s.ulysses = n / t;
    out.push_back(s);
  }
  return out;
}

Tensor ints(const std::vector<int64_t>& v) {
  Tensor t = Tensor::zeros(Shape{static_cast<int64_t>(v.size())}, DType::kI64);
  std::copy(v.begin(), v.end(), t.mutable_data<int64_t>());
  return t;
}

TEST(T5TensorParallel, EqualsOneProcessOnRandomWeights) {
  wan::T5Config c;
  c.vocab = 97, c.dim = 64, c.dim_attn = 64, c.dim_ffn = 96, c.num_heads = 8, c.num_layers = 2;
  const wan::WeightFn weights = wan::random_t5_weights(c, DType::kF32, 21);
  const Tensor ids = ints({5, 17, 3, 96, 40, 2, 0, 11, 64, 7, 0});
  const Tensor mask = ints({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});  // two padding keys
  for (wan::Precision p : {wan::Precision::kFP32, wan::Precision::kBF16}) {
    wan::T5Encoder whole(c, weights, p);
    const Tensor ref = whole.forward(ids, mask);
    for (const MeshSpec& spec : tp_meshes(c.num_heads)) {
      Mesh mesh(spec, world());
      ExecContext ctx;
      ctx.mesh = &mesh;
      wan::T5Encoder shard(c, weights, p, ctx);
      EXPECT_LT(shard.held_weight_bytes(), whole.held_weight_bytes()) << spec.str();
      const double tol = p == wan::Precision::kBF16 ? 5e-3 : 1e-5;
      EXPECT_LE(vidax::testing::max_rel_diff(shard.forward(ids, mask), ref), tol)
          << spec.str() << (p == wan::Precision::kBF16 ? " bf16" : " fp32");
    }
  }
}

TEST(T5TensorParallel, FixtureMatchesTheReference) {
  const std::string dir = VIDAX_FIXTURES_DIR "/wan/";
  if (!std::filesystem::exists(dir + "t5_tiny.io.safetensors"))
    GTEST_SKIP() << "fixtures not found in " << dir;
  const auto ck = wan::T5Checkpoint::open(dir + "t5_tiny.weights.safetensors");
  const auto io = SafetensorsFile::open(dir + "t5_tiny.io.safetensors");
  const auto ref = io.tensor("out").to_float_vector();
  for (const MeshSpec& spec : tp_meshes(ck.config().num_heads)) {
    Mesh mesh(spec, world());
    ExecContext ctx;
    ctx.mesh = &mesh;
    wan::T5Encoder shard(ck.config(), ck.loader(), wan::Precision::kFP32, ctx);
    const auto got = shard.forward(io.tensor("ids"), io.tensor("mask")).to_float_vector();
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-5 + 1e-5 * std::fabs(ref[i])) << spec.str() << " " << i;
  }
}

}  // namespace
}  // namespace vidax::dist
