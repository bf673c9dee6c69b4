#include "models/wan/dit_schedule.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "models/wan/dit_tensors.h"

namespace vidax::wan {
namespace {

using dist::CollectiveKind;
using dist::MeshAxis;
using dist::OpClass;
using dist::ScheduledOp;

// A linear of block 0 as one tp rank holds it (dit_tensors.h): [out, in] after the split, and
// whether its output is a partial sum that the tp group all-reduces.
struct RankLinear {
  int64_t out = 0, in = 0;
  bool row_split = false;
};

class BlockLinears {
 public:
  BlockLinears(const DitConfig& c, int tp) : tp_(tp) {
    for (auto& d : dit_tensor_decls(c))
      if (d.name.rfind("blocks.0.", 0) == 0) decls_.push_back(std::move(d));
  }
  RankLinear get(const std::string& name) const {
    const std::string weight = "blocks.0." + name + ".weight";
    for (const auto& d : decls_) {
      if (d.name != weight) continue;
      const ShardSlice s = shard_slice(d, 0, tp_);
      return {s.shape[0], s.shape[1], d.shard == ShardAxis::kInput && tp_ > 1};
    }
    VIDAX_CHECK(false, "dit_schedule: no declared tensor ", weight);
    return {};
  }
  // Elements of one block as a tp rank holds it in the checkpoint's layout (ShardedBlocks).
  double checkpoint_elements() const {
    double n = 0;
    for (const auto& d : decls_) n += static_cast<double>(shard_slice(d, 0, tp_).shape.numel());
    return n;
  }

 private:
  int tp_;
  std::vector<TensorDecl> decls_;
};

ScheduledOp gemm(std::string name, int64_t rows, const RankLinear& l) {
  ScheduledOp op;
  op.name = std::move(name);
  op.cls = OpClass::kGemm;
  op.flops =
      2.0 * static_cast<double>(rows) * static_cast<double>(l.out) * static_cast<double>(l.in);
  return op;
}

ScheduledOp memory(std::string name, double bytes) {
  ScheduledOp op;
  op.name = std::move(name);
  op.cls = OpClass::kMemory;
  op.bytes = bytes;
  return op;
}

ScheduledOp attention(std::string name, double flops) {
  ScheduledOp op;
  op.name = std::move(name);
  op.cls = OpClass::kAttention;
  op.flops = flops;
  return op;
}

ScheduledOp collective(std::string name, CollectiveKind kind, MeshAxis axis, double bytes,
                       int64_t calls = 1) {
  ScheduledOp op;
  op.name = std::move(name);
  op.cls = OpClass::kCollective;
  op.kind = kind;
  op.axis = axis;
  op.bytes = bytes;
  op.calls = calls;
  return op;
}

int64_t context_rows(const DitConfig& c, int64_t context_tokens) {
  const int64_t n = context_tokens > 0 ? context_tokens : c.text_len;
  return n < c.text_len ? n + 1 : n;  // the padding rows count as one (dit.cpp)
}

}  // namespace

double dit_block_checkpoint_bytes(const DitConfig& config, double item_bytes, int tp) {
  return BlockLinears(config, tp).checkpoint_elements() * item_bytes;
}

dist::Schedule dit_forward_schedule(const DitConfig& c, const DitScheduleRequest& req,
                                    const dist::MeshSpec& mesh, bool new_context) {
  VIDAX_CHECK(req.tokens > 0, "dit_forward_schedule: no tokens");
  const int U = mesh.ulysses, R = mesh.ring, T = mesh.tp, sp = mesh.sp();
  const int64_t L = req.tokens, lr = (L + sp - 1) / sp;  // rows per rank, padding included
  const int64_t rows = lr;
  const double b = req.precision == Precision::kBF16 ? 2.0 : 4.0;  // activation bytes on the wire
  const double dim = static_cast<double>(c.dim), hd = static_cast<double>(c.head_dim());
  const BlockLinears lin(c, T);
  const RankLinear qkv_one = lin.get("self_attn.q");
  const RankLinear qkv{3 * qkv_one.out, qkv_one.in, false};  // q | k | v fused
  const double ldim = static_cast<double>(qkv_one.out);      // this rank's heads' channels
  const double width = ldim / U;                             // after the Ulysses exchange
  const double r = static_cast<double>(rows);
  const int64_t ctx = context_rows(c, req.context_tokens);
  const bool norms = c.qk_norm && T > 1;

  dist::Schedule s;
  if (new_context) {
    dist::ScheduleSegment kv{"context.block", c.num_layers, {}};
    const RankLinear k = lin.get("cross_attn.k");
    kv.ops.push_back(gemm("cross_kv", ctx, {2 * k.out, k.in}));
    if (norms)
      kv.ops.push_back(collective("tp.cross_k_norm", CollectiveKind::kAllReduce, MeshAxis::kTp,
                                  static_cast<double>(ctx) * 4));
    if (c.image_branch()) {
      kv.ops.push_back(gemm("cross_kv_img", 257, {2 * k.out, k.in}));
      if (norms)
        kv.ops.push_back(collective("tp.cross_k_img_norm", CollectiveKind::kAllReduce,
                                    MeshAxis::kTp, 257.0 * 4));
    }
    s.segments.push_back(std::move(kv));
  }

  dist::ScheduleSegment embed{"embed", 1, {}};
  embed.ops.push_back(gemm("patch_embedding", rows, {c.dim, c.in_dim * c.patch_volume()}));
  // The text embedding runs at every forward (only the cross-attention keys/values are cached),
  // on the real context rows and one padding row (dit.cpp).
  embed.ops.push_back(gemm("text_embedding", ctx, {c.dim, c.text_dim + c.dim}));
  embed.ops.push_back(gemm("time_embedding", 1, {c.dim, c.freq_dim + c.dim + 6 * c.dim}));
  s.segments.push_back(std::move(embed));

  dist::ScheduleSegment blk{"block", c.num_layers, {}};
  auto& o = blk.ops;
  // Self-attention (dit_block.cpp self_attention, dist/sequence_parallel.cpp).
  o.push_back(memory("norm_modulate", r * dim * (4 + b)));
  o.push_back(gemm("qkv", rows, qkv));
  if (norms)
    o.push_back(collective("tp.qk_norm", CollectiveKind::kAllReduce, MeshAxis::kTp, r * 4, 2));
  o.push_back(memory("rmsnorm_rope", r * 3 * ldim * (4 + 4 + b)));
  if (U > 1) {
    if (req.sparse_policy && req.precision == Precision::kBF16)
      o.push_back(collective("ulysses.qkv_f32", CollectiveKind::kAllToAll, MeshAxis::kUlysses,
                             r * 3 * width * 4));
    o.push_back(memory("ulysses.pack", r * 3 * ldim * 2 * b));
    o.push_back(collective("ulysses.qkv", CollectiveKind::kAllToAll, MeshAxis::kUlysses,
                           r * 3 * width * b));
  }
  {
    // Queries: every real row (one ring shard) or the ring shard's rows; keys: every real row.
    const double q_rows = R == 1 ? static_cast<double>(L) : static_cast<double>(U * lr);
    const double heads_here = static_cast<double>(c.num_heads) / (U * T);
    o.push_back(attention("self_attention", 4.0 * q_rows * static_cast<double>(L) * hd *
                                                heads_here * req.attention_density));
  }
  if (R > 1)
    o.push_back(collective("ring.kv", CollectiveKind::kSendRecv, MeshAxis::kRing,
                           static_cast<double>(U * lr) * 2 * width * b, R - 1));
  if (U > 1) {
    o.push_back(
        collective("ulysses.out", CollectiveKind::kAllToAll, MeshAxis::kUlysses, r * width * b));
    o.push_back(memory("ulysses.unpack", r * ldim * 8));
  }
  const RankLinear so = lin.get("self_attn.o");
  o.push_back(gemm("o", rows, so));
  if (so.row_split)
    o.push_back(collective("tp.o", CollectiveKind::kAllReduce, MeshAxis::kTp, r * dim * 4));
  o.push_back(memory("gated_add", r * dim * 12));
  // Cross-attention (its keys/values cached per context).
  o.push_back(memory("norm3", r * dim * (4 + b)));
  o.push_back(gemm("cross_q", rows, lin.get("cross_attn.q")));
  if (norms)
    o.push_back(collective("tp.cross_q_norm", CollectiveKind::kAllReduce, MeshAxis::kTp, r * 4));
  const double kv_rows = static_cast<double>(ctx + (c.image_branch() ? 257 : 0));
  o.push_back(attention("cross_attention", 4.0 * r * kv_rows * ldim));
  const RankLinear co = lin.get("cross_attn.o");
  o.push_back(gemm("cross_o", rows, co));
  if (co.row_split)
    o.push_back(collective("tp.cross_o", CollectiveKind::kAllReduce, MeshAxis::kTp, r * dim * 4));
  o.push_back(memory("residual_add", r * dim * 12));
  // FFN.
  o.push_back(memory("norm_modulate", r * dim * (4 + b)));
  o.push_back(gemm("ffn_in", rows, lin.get("ffn.0")));
  const RankLinear f2 = lin.get("ffn.2");
  o.push_back(gemm("ffn_out", rows, f2));
  if (f2.row_split)
    o.push_back(collective("tp.ffn_out", CollectiveKind::kAllReduce, MeshAxis::kTp, r * dim * 4));
  o.push_back(memory("gated_add", r * dim * 12));
  if (req.sharded_weights && sp > 1) {
    ScheduledOp g = collective("shard.gather", CollectiveKind::kAllGather, MeshAxis::kSp,
                               dit_block_checkpoint_bytes(c, req.checkpoint_item_bytes, T) / sp);
    g.overlapped = true;
    o.push_back(g);
    // The loader thread then builds this rank's (tp slice of the) block from the gathered bytes.
    ScheduledOp pack =
        memory("shard.pack", dit_block_checkpoint_bytes(c, req.checkpoint_item_bytes, T));
    pack.cls = OpClass::kPack;
    pack.overlapped = true;
    o.push_back(pack);
  }
  s.segments.push_back(std::move(blk));

  dist::ScheduleSegment head{"head", 1, {}};
  const int64_t out_features = c.out_dim * c.patch_volume();
  head.ops.push_back(gemm("head", rows, {out_features, c.dim}));
  if (sp > 1)
    head.ops.push_back(collective("sp.gather", CollectiveKind::kAllGather, MeshAxis::kSp,
                                  r * static_cast<double>(out_features) * 4));
  s.segments.push_back(std::move(head));
  return s;
}

dist::Schedule dit_step_schedule(const DitConfig& c, const DitScheduleRequest& req,
                                 const dist::MeshSpec& mesh) {
  VIDAX_CHECK(mesh.cfg == 1 || req.guided, "dit_step_schedule: cfg=2 without guidance");
  const dist::Schedule forward = dit_forward_schedule(c, req, mesh);
  dist::Schedule s;
  s.append(forward, req.guided && mesh.cfg == 1 ? 2 : 1);
  if (mesh.cfg > 1) {
    dist::ScheduleSegment g{"guidance", 1, {}};
    g.ops.push_back(collective("cfg.gather", CollectiveKind::kAllGather, MeshAxis::kCfg,
                               static_cast<double>(req.latent_numel) * 4));
    s.segments.push_back(std::move(g));
  }
  return s;
}

}  // namespace vidax::wan
