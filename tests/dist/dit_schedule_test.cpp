// The DiT's schedule (models/wan/dit_schedule.h) against what the runtime really issues: on every
// mesh the world allows (cfg, ring, ulysses and tp), fp32 and bf16, dense and with a sparse
// policy, resident and sharded weights, the collective calls and bytes each rank's groups counted
// in a real forward equal the schedule's, kind by kind, for the first forward of a context (which
// computes the cross-attention keys) and for the next one (which reuses them).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/mesh.h"
#include "dist/schedule.h"
#include "dist/world.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_schedule.h"
#include "sparse/attention_policy.h"

namespace vidax::dist {
namespace {

wan::DitConfig config() {
  wan::DitConfig c;
  c.dim = 128, c.num_heads = 8, c.ffn_dim = 96, c.num_layers = 3, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16;
  return c;
}

Tensor filled(const Shape& shape, float step) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 17) * step - 0.5f;
  return Tensor::from_floats(v, shape);
}

// 3 x 5 x 7 = 105 tokens (no rank count divides it) and a 3-token context (padded to 4 rows).
wan::DitSample sample() {
  wan::DitSample s;
  s.x = filled(Shape{16, 3, 10, 14}, 0.05f);
  s.context = filled(Shape{3, 16}, 0.07f);
  s.t = Tensor::from_floats(std::vector<float>{500.0f}, Shape{1});
  return s;
}

// Every (cfg, ring, ulysses, tp) over the world with ulysses * tp dividing the 8 heads.
std::vector<MeshSpec> meshes() {
  std::vector<MeshSpec> out;
  const int n = world().size();
  for (int c = 1; c <= 2; ++c)
    for (int t = 1; t <= n; ++t)
      for (int u = 1; u * t * c <= n; ++u) {
        if (n % (c * u * t) != 0 || 8 % (u * t) != 0) continue;
        out.push_back({c, n / (c * u * t), u, t});
      }
  return out;
}

void expect_counted(const Schedule& s, const Mesh& mesh, const std::string& what) {
  const CommStats got = mesh.stats();
  for (CollectiveKind k :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kAllToAll,
        CollectiveKind::kSendRecv, CollectiveKind::kBroadcast, CollectiveKind::kReduceScatter}) {
    const auto i = static_cast<size_t>(k);
    EXPECT_EQ(got.calls[i], s.calls(k, mesh.spec()))
        << what << " " << collective_name(k) << " calls, rank " << world().rank();
    EXPECT_EQ(static_cast<double>(got.bytes_sent[i]), s.bytes_sent(k, mesh.spec()))
        << what << " " << collective_name(k) << " bytes, rank " << world().rank();
  }
}

// The schedule without the sharded weights' gathers, and those gathers' bytes per call.
Schedule without_shard_gathers(Schedule s, double* gather_bytes) {
  for (auto& seg : s.segments)
    std::erase_if(seg.ops, [&](const ScheduledOp& op) {
      if (!op.overlapped) return false;
      if (op.collective()) *gather_bytes = op.bytes;  // (the other is the block's repacking)
      return true;
    });
  return s;
}

TEST(DitSchedule, CollectivesEqualWhatTheRuntimeIssuesOnEveryMesh) {
  const wan::DitConfig c = config();
  const wan::WeightFn weights = wan::random_dit_weights(c, DType::kF32, 3);
  for (const MeshSpec& spec : meshes()) {
    Mesh mesh(spec, world());
    ExecContext ctx;
    ctx.mesh = &mesh;
    for (wan::Precision p : {wan::Precision::kFP32, wan::Precision::kBF16}) {
      for (const char* policy : {"dense", "svg:density=0.4,block=8,warmup=0,warmup_layers=0"}) {
        const bool sparse = std::string(policy) != "dense";
        if (sparse && spec.ring > 1) continue;  // ring attention is dense only
        for (bool sharded : {false, true}) {
          if (sharded && spec.sp() < 2) continue;
          wan::WeightResidency residency;
          if (sharded) residency.shard_group = wan::weight_shard_group(ctx);
          wan::WanDit model(c, weights, p, ctx, residency);
          if (sparse) model.set_attention(sparse::make_attention_policy(policy));
          wan::DitScheduleRequest req;
          req.tokens = 105;
          req.context_tokens = 3;
          req.precision = p;
          req.sparse_policy = sparse;
          req.sharded_weights = sharded;
          req.checkpoint_item_bytes = 4;  // the random weights are f32
          const std::string what = spec.str() + (p == wan::Precision::kBF16 ? " bf16 " : " fp32 ") +
                                   policy + (sharded ? " sharded" : "");
          // The sharded weights gather on their own group from a loader thread that runs ahead
          // (a window of two blocks), so those are checked per call and over both forwards.
          double gather_bytes = 0;
          mesh.reset_stats();
          model.forward(sample());
          expect_counted(
              without_shard_gathers(wan::dit_forward_schedule(c, req, spec, /*new_context=*/true),
                                    &gather_bytes),
              mesh, what + " (new context)");
          mesh.reset_stats();
          model.forward(sample());
          expect_counted(
              without_shard_gathers(wan::dit_forward_schedule(c, req, spec), &gather_bytes), mesh,
              what);
          if (sharded) {
            const CommStats g = residency.shard_group->stats();
            const auto i = static_cast<size_t>(CollectiveKind::kAllGather);
            EXPECT_GE(g.calls[i], 2 * c.num_layers) << what;
            EXPECT_LE(g.calls[i], 2 * c.num_layers + 2) << what;  // the window's prefetch
            const double per_call =
                static_cast<double>(g.bytes_sent[i]) / static_cast<double>(g.calls[i]);
            const double want =
                collective_bytes_sent(CollectiveKind::kAllGather, gather_bytes, spec.sp());
            EXPECT_NEAR(per_call, want, 64.0 * spec.sp()) << what;  // chunks are 64-aligned
          }
        }
      }
    }
  }
}

// A guided step runs two forwards per rank, or one under cfg = 2 plus the exchange of the
// predictions; the FLOPs per rank fall by the mesh's split of the work.
TEST(DitSchedule, StepCountsForwardsAndSplitsTheWork) {
  wan::DitConfig c = config();
  wan::DitScheduleRequest req;
  req.tokens = 105;
  req.latent_numel = 16 * 3 * 10 * 14;
  const Schedule one = wan::dit_step_schedule(c, req, {});
  const Schedule cfg2 = wan::dit_step_schedule(c, req, {2, 1, 1, 1});
  EXPECT_DOUBLE_EQ(cfg2.total_flops() * 2, one.total_flops());
  EXPECT_EQ(cfg2.calls(CollectiveKind::kAllGather, {2, 1, 1, 1}), 1);
  EXPECT_DOUBLE_EQ(cfg2.bytes_sent(CollectiveKind::kAllGather, {2, 1, 1, 1}),
                   static_cast<double>(req.latent_numel) * 4);
  EXPECT_EQ(one.calls(CollectiveKind::kAllGather, {}), 0);
  // tp = 2 halves every GEMM of the blocks (the embeddings and head stay whole).
  const Schedule tp2 = wan::dit_step_schedule(c, req, {1, 1, 1, 2});
  EXPECT_LT(tp2.flops(OpClass::kGemm), one.flops(OpClass::kGemm) * 0.6);
  EXPECT_GT(tp2.calls(CollectiveKind::kAllReduce, {1, 1, 1, 2}), 0);
  req.guided = false;
  EXPECT_DOUBLE_EQ(wan::dit_step_schedule(c, req, {}).total_flops() * 2, one.total_flops());
}

}  // namespace
}  // namespace vidax::dist

namespace vidax::dist {
namespace {

// The schedule's totals count every call and every repeat of a segment, by class.
TEST(Schedule, TotalsCountCallsAndRepeatsByClass) {
  Schedule s;
  ScheduledOp gemm{"gemm", OpClass::kGemm, 10};
  gemm.calls = 3;
  ScheduledOp conv{"conv", OpClass::kConv, 7};
  ScheduledOp norm{"norm", OpClass::kMemory};
  norm.bytes = 5;
  norm.calls = 2;
  s.segments.push_back({"block", 4, {gemm, conv, norm}});
  s.segments.push_back({"head", 1, {norm}});
  EXPECT_DOUBLE_EQ(s.flops(OpClass::kGemm), 4 * 3 * 10.0);
  EXPECT_DOUBLE_EQ(s.flops(OpClass::kConv), 4 * 7.0);
  EXPECT_DOUBLE_EQ(s.total_flops(), 4 * 3 * 10.0 + 4 * 7.0);
  EXPECT_DOUBLE_EQ(s.memory_bytes(), 4 * 2 * 5.0 + 2 * 5.0);
}

}  // namespace
}  // namespace vidax::dist
