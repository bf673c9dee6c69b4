// The DiT forward under every mesh the world allows (ulysses, ring and tp = n, and the mixed
// ones), in process, against the same forward on a single-process mesh computed on the same
// rank: dense and every sparse policy (window, svg, spade, west) under Ulysses and tp, dense under
// ring; fp32 and bf16; a 105-token grid that no rank count divides; Wan 2.2 per-token timesteps.
// Under tp each rank builds its own model from its shard of the same weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dist/mesh.h"
#include "dist/world.h"
#include "io/safetensors.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "sparse/attention_policy.h"
#include "sparse/west_policy.h"
#include "support/test_support.h"

namespace vidax::dist {
namespace {

wan::DitConfig config() {
  wan::DitConfig c;
  c.dim = 128, c.num_heads = 8, c.ffn_dim = 96, c.num_layers = 2, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16;
  return c;
}

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  return Tensor::from_floats(v, shape);
}

wan::DitSample sample(bool per_token) {
  wan::DitSample s;
  s.x = random_tensor(Shape{16, 3, 10, 14}, 1);  // grid 3 x 5 x 7 = 105 tokens
  s.context = random_tensor(Shape{3, 16}, 2);
  if (per_token) {
    std::vector<float> t(105, 640.0f);
    for (int i = 0; i < 35; ++i) t[static_cast<size_t>(i)] = 0.0f;  // the first frame kept clean
    s.t = Tensor::from_floats(t, Shape{105});
  } else {
    s.t = Tensor::from_floats(std::vector<float>{700.0f}, Shape{1});
  }
  s.step = 4;
  s.steps = 10;
  return s;
}

// Every (ring, ulysses, tp) with ring * ulysses * tp = world size and ulysses * tp dividing the
// 8 heads.
std::vector<MeshSpec> meshes() {
  std::vector<MeshSpec> out;
  const int n = world().size();
  for (int t = 1; t <= n; ++t) {
    for (int u = 1; u * t <= n; ++u) {
      if (n % (u * t) != 0 || 8 % (u * t) != 0) continue;
      MeshSpec s;
      s.ulysses = u;
      s.tp = t;
      s.ring = n / (u * t);
      out.push_back(s);
    }
  }
  return out;
}

// The model a rank of `mesh` runs: `whole` itself without tp, else this rank's tp shard built
// from the same weights (into `storage`).
wan::WanDit& model_for(const Mesh& mesh, wan::WanDit& whole, const wan::WeightFn& weights,
                       std::unique_ptr<wan::WanDit>& storage) {
  ExecContext ctx;
  ctx.mesh = &mesh;
  if (mesh.spec().tp == 1) {
    whole.set_context(ctx);
    return whole;
  }
  storage = std::make_unique<wan::WanDit>(whole.config(), weights, whole.precision(), ctx);
  return *storage;
}

// A WEST prior recorded from the model's own dense forward (written by rank 0, read by all).
std::string west_prior(wan::WanDit& model) {
  const std::string path = "/tmp/vidax_dit_mesh_test_" + std::to_string(world().size()) + ".west";
  if (world().rank() == 0) {
    auto rec = std::make_shared<sparse::WestRecorder>(std::array<int64_t, 3>{2, 2, 2}, 0, 0);
    model.set_attention(rec);
    model.set_context({});
    model.forward(sample(false));
    sparse::write_west_prior(path, rec->accumulator().prior());
    model.set_attention(nullptr);
  }
  world().barrier();
  return path;
}

TEST(DitMesh, EveryMeshAndPolicyEqualsOneProcess) {
  const wan::DitConfig c = config();
  const wan::WeightFn weights = wan::random_dit_weights(c, DType::kF32, 5);
  for (wan::Precision p : {wan::Precision::kFP32, wan::Precision::kBF16}) {
    wan::WanDit model(c, weights, p);
    const std::string prior = west_prior(model);
    const std::vector<std::string> policies = {
        "dense", "window:2,4,4:tile=1,2,2", "svg:density=0.4,block=8,warmup=0,warmup_layers=0",
        "spade:topp=0.7,dense_layers=0", "west:" + prior + ":budget=0.3,block=1x2x4"};
    for (const MeshSpec& spec : meshes()) {
      Mesh mesh(spec, world());
      std::unique_ptr<wan::WanDit> shard;
      wan::WanDit& ranked = model_for(mesh, model, weights, shard);
      for (const std::string& policy : policies) {
        if (spec.ring > 1 && policy != "dense") continue;  // ring is dense only
        for (bool per_token : {false, true}) {
          // The reference: one process (a fresh policy object: policies keep per-call state).
          model.set_context({});
          model.set_attention(policy == "dense" ? nullptr : sparse::make_attention_policy(policy));
          const Tensor ref = model.forward(sample(per_token));
          if (&ranked == &model) {
            ExecContext ctx;
            ctx.mesh = &mesh;
            model.set_context(ctx);
          }
          ranked.set_attention(policy == "dense" ? nullptr : sparse::make_attention_policy(policy));
          const Tensor got = ranked.forward(sample(per_token));
          // Ring and tp change summation orders (ring: the softmax merge; tp: the row-split
          // sums and the q/k norm statistics), which bf16 roundings downstream amplify.
          const bool reordered = spec.ring > 1 || spec.tp > 1;
          const double tol = reordered ? (p == wan::Precision::kBF16 ? 5e-3 : 1e-5) : 1e-6;
          EXPECT_LE(vidax::testing::max_rel_diff(got, ref), tol)
              << spec.str() << " " << policy << (per_token ? " per-token t" : "")
              << (p == wan::Precision::kBF16 ? " bf16" : " fp32");
        }
      }
      model.set_context({});
    }
  }
}

// --weights sharded: every ring x ulysses rank of a tp rank keeps 1/N of the blocks' checkpoint
// bytes and gathers each block before use. The gathered bytes are the checkpoint's, so the results
// are those of the resident model on the same mesh bit for bit, forward after forward (the
// stream cycles through the blocks), while the blocks' share of memory falls to about 1/N plus
// the window of two packed blocks.
TEST(DitMesh, ShardedWeightsEqualTheResidentModelAndHoldTheirShare) {
  wan::DitConfig c = config();
  c.num_layers = 8;
  const wan::WeightFn weights = wan::random_dit_weights(c, DType::kF32, 9);
  wan::DitConfig no_blocks = c;
  no_blocks.num_layers = 0;
  const wan::WanDit stem(no_blocks, weights, wan::Precision::kFP32);
  for (wan::Precision p : {wan::Precision::kFP32, wan::Precision::kBF16}) {
    wan::WanDit whole(c, weights, p);
    for (const MeshSpec& spec : meshes()) {
      const int replicas = spec.ring * spec.ulysses;  // (no cfg axis in these meshes)
      if (replicas < 2) continue;
      Mesh mesh(spec, world());
      std::unique_ptr<wan::WanDit> shard;
      wan::WanDit& resident = model_for(mesh, whole, weights, shard);
      ExecContext ctx;
      ctx.mesh = &mesh;
      wan::WeightResidency residency;
      residency.shard_group = wan::weight_shard_group(ctx);
      wan::WanDit sharded(c, weights, p, ctx, residency);
      for (int call = 0; call < 3; ++call) {
        const bool per_token = call == 1;
        const Tensor ref = resident.forward(sample(per_token));
        const Tensor got = sharded.forward(sample(per_token));
        EXPECT_EQ(vidax::testing::max_rel_diff(got, ref), 0.0)
            << spec.str() << " call " << call << (p == wan::Precision::kBF16 ? " bf16" : "");
      }
      const wan::WeightStreamStats st = sharded.weight_stream_stats();
      EXPECT_EQ(st.pinned_blocks, 0);
      EXPECT_EQ(st.window, 2);
      EXPECT_GE(st.loads, 3 * c.num_layers - 2);  // every block gathered at every forward
      if (p == wan::Precision::kFP32) {           // checkpoint bytes and packed bytes are both f32
        // The replicas split their tp rank's slices: 1/(N tp) of all blocks' bytes, plus the
        // window of two packed blocks of this tp rank.
        const double all = static_cast<double>(whole.weight_bytes() - stem.weight_bytes());
        const double held = static_cast<double>(sharded.weight_bytes() - stem.weight_bytes());
        EXPECT_LE(held, all * (1.0 / (replicas * spec.tp) + 2.0 / (8.0 * spec.tp)) * 1.1)
            << spec.str();
        EXPECT_LT(held, static_cast<double>(resident.weight_bytes() - stem.weight_bytes()))
            << spec.str();
      }
      whole.set_context({});
    }
  }
}

// A tp shard holds 1/tp of every block's weights (a model wide enough that the GEMM layout's
// padding of small matrices does not matter).
TEST(DitMesh, TensorParallelShardsHoldTheirShareOfTheWeights) {
  wan::DitConfig c = config();
  c.dim = 512, c.ffn_dim = 1024, c.num_layers = 1;
  const wan::WeightFn weights = wan::random_dit_weights(c, DType::kF32, 5);
  wan::WanDit whole(c, weights, wan::Precision::kFP32);
  for (const MeshSpec& spec : meshes()) {
    if (spec.tp == 1) continue;
    Mesh mesh(spec, world());
    std::unique_ptr<wan::WanDit> shard;
    wan::WanDit& ranked = model_for(mesh, whole, weights, shard);
    // Blocks shrink by tp; the embeddings and head (replicated) do not.
    wan::DitConfig no_blocks = c;
    no_blocks.num_layers = 0;
    const wan::WanDit stem(no_blocks, weights, wan::Precision::kFP32);
    const double block_bytes = static_cast<double>(whole.weight_bytes() - stem.weight_bytes());
    const double got = static_cast<double>(ranked.weight_bytes() - stem.weight_bytes());
    EXPECT_NEAR(got, block_bytes / spec.tp, 0.01 * block_bytes / spec.tp) << spec.str();
  }
}

// fp8 weights kept fp8 and split over tp (each rank its slice of the codes, the scales with
// them): the single-process fp8 model's result (fp32, within the reordered sums); streamed
// under a one-block budget, bitwise the resident shard.
TEST(DitMesh, TensorParallelKeepsFp8Weights) {
  const wan::DitConfig c = config();
  const std::string path =
      "/tmp/vidax_dit_mesh_fp8_" + std::to_string(world().size()) + ".safetensors";
  if (world().rank() == 0) wan::write_random_dit_checkpoint(path, c, DType::kF8E4M3, 8);
  world().barrier();
  const auto ck = std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(path));
  wan::WeightResidency keep;
  keep.fp8 = wan::kept_weight_loader(ck, true);
  wan::WanDit whole(c, wan::shared_loader(ck), wan::Precision::kFP32, {}, keep);
  const Tensor ref = whole.forward(sample(false));
  for (const MeshSpec& spec : meshes()) {
    if (spec.tp == 1) continue;
    Mesh mesh(spec, world());
    ExecContext ctx;
    ctx.mesh = &mesh;
    wan::WanDit shard(c, wan::shared_loader(ck), wan::Precision::kFP32, ctx, keep);
    const Tensor got = shard.forward(sample(false));
    EXPECT_LE(vidax::testing::max_rel_diff(got, ref), 1e-5) << spec.str();
    // The same shard streamed under a budget of one block: bit for bit.
    wan::WeightResidency stream = keep;
    wan::DitConfig stem_config = c;
    stem_config.num_layers = 0;
    const double stem = static_cast<double>(
        wan::WanDit(stem_config, wan::shared_loader(ck), wan::Precision::kFP32).weight_bytes());
    stream.budget_bytes = static_cast<int64_t>(
        stem + 1.5 * wan::WanDit::block_weight_bytes(c, wan::Precision::kFP32, spec.tp, 1));
    wan::WanDit streamed(c, wan::shared_loader(ck), wan::Precision::kFP32, ctx, stream);
    EXPECT_EQ(streamed.weight_stream_stats().streamed_blocks, c.num_layers) << spec.str();
    EXPECT_EQ(streamed.forward(sample(false)).to_float_vector(), got.to_float_vector())
        << spec.str();
  }
  world().barrier();
  if (world().rank() == 0) std::remove(path.c_str());
}

// The official-code fixtures (i2v with CLIP features; the Wan 2.2 per-token form) on every mesh:
// the reference's outputs to the single-process tolerance.
TEST(DitMesh, FixturesMatchOnEveryMesh) {
  const std::string dir = VIDAX_FIXTURES_DIR "/wan/";
  if (!std::filesystem::exists(dir + "dit_i2v_tiny.io.safetensors"))
    GTEST_SKIP() << "fixtures not found in " << dir;
  struct Fixture {
    std::string weights, io;
    bool ti2v;
  };
  for (const Fixture& f :
       {Fixture{"dit_i2v_tiny.bf16.safetensors", "dit_i2v_tiny.io.safetensors", false},
        Fixture{"dit_t2v_tiny.weights.safetensors", "dit_ti2v_tiny.io.safetensors", true}}) {
    wan::DitConfig cfg = wan::DitCheckpoint::open(dir + f.weights).config();
    if (f.ti2v) cfg.kind = wan::DitKind::kTI2V;  // same tensors; the Wan 2.2 forward
    const auto ck = wan::DitCheckpoint::open(dir + f.weights, cfg);
    wan::WanDit model(ck.config(), ck.loader(), wan::Precision::kFP32);
    auto io = SafetensorsFile::open(dir + f.io);
    for (const MeshSpec& spec : meshes()) {
      if (cfg.num_heads % (spec.ulysses * spec.tp) != 0) continue;
      Mesh mesh(spec, world());
      std::unique_ptr<wan::WanDit> shard;
      wan::WanDit& ranked = model_for(mesh, model, ck.loader(), shard);
      // --weights sharded over the sequence ranks (the tp slices of the checkpoint's stored
      // tensors, i2v's image branch included) gives the resident shard's bits.
      std::unique_ptr<wan::WanDit> sharded;
      if (spec.sp() >= 2) {
        ExecContext ctx;
        ctx.mesh = &mesh;
        wan::WeightResidency residency;
        residency.shard_group = wan::weight_shard_group(ctx);
        sharded = std::make_unique<wan::WanDit>(ck.config(), ck.loader(), wan::Precision::kFP32,
                                                ctx, residency);
      }
      for (const char* call : {"call0", "call1"}) {
        wan::DitSample s;
        s.x = io.tensor("x");
        s.context = io.tensor("context");
        if (io.contains("y")) s.y = io.tensor("y");
        if (io.contains("clip_fea")) s.clip_fea = io.tensor("clip_fea");
        Tensor t = io.tensor(std::string(call) + ".t");
        if (t.rank() == 2) t = t.select(0, 0).contiguous();  // [1, L] -> [L]
        s.t = t;
        const Tensor out = ranked.forward(s);
        if (sharded) {
          EXPECT_EQ(vidax::testing::max_rel_diff(sharded->forward(s), out), 0.0)
              << f.io << " " << call << " " << spec.str() << " sharded";
        }
        const auto got = out.to_float_vector();
        const auto ref = io.tensor(std::string(call) + ".out").to_float_vector();
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(got[i], ref[i], 1e-4 + 1e-4 * std::fabs(ref[i]))
              << f.io << " " << call << " " << spec.str() << " element " << i;
      }
      model.set_context({});
    }
  }
}

// Fewer tokens than ranks: with 3 tokens on 4 or 8 sequence ranks some ranks hold only padding
// rows, and under ring most key chunks are all padding.
TEST(DitMesh, RanksWithOnlyPaddingRows) {
  const wan::DitConfig c = config();
  const wan::WeightFn weights = wan::random_dit_weights(c, DType::kF32, 6);
  wan::WanDit model(c, weights, wan::Precision::kFP32);
  wan::DitSample s;
  s.x = random_tensor(Shape{16, 1, 2, 6}, 9);  // grid 1 x 1 x 3 = 3 tokens
  s.context = random_tensor(Shape{2, 16}, 10);
  s.t = Tensor::from_floats(std::vector<float>{300.0f}, Shape{1});
  const Tensor ref = model.forward(s);
  for (const MeshSpec& spec : meshes()) {
    Mesh mesh(spec, world());
    std::unique_ptr<wan::WanDit> shard;
    wan::WanDit& ranked = model_for(mesh, model, weights, shard);
    EXPECT_LE(vidax::testing::max_rel_diff(ranked.forward(s), ref), 1e-5) << spec.str();
    model.set_context({});
  }
}

}  // namespace
}  // namespace vidax::dist
