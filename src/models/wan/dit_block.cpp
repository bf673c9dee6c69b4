// One Wan DiT block:
//   x += self_attn(LN(x) * (1 + scale_sa) + shift_sa) * gate_sa
//   x += cross_attn(norm3(x), context)                       (neither modulated nor gated)
//   x += ffn(LN(x) * (1 + scale_ffn) + shift_ffn) * gate_ffn
// with (shift_sa, scale_sa, gate_sa, shift_ffn, scale_ffn, gate_ffn) = modulation + e0.
#include <cmath>
#include <cstring>

#include "core/convert.h"
#include "core/profile.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/flash_attention.h"
#include "models/wan/dit_impl.h"

namespace vidax::wan {
namespace {

// RMSNorm over the full model dim of `rows` rows laid out with `stride` floats between rows.
void rms_norm_strided(float* x, int64_t rows, int64_t dim, int64_t stride,
                      const std::vector<float>& weight, float eps) {
  if (weight.empty()) return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    rms_norm_rows(x + r * stride, x + r * stride, 1, dim, weight.data(), eps);
}

void capture_rows(const DitState& st, const std::string& name, const float* data, int64_t rows,
                  int64_t cols, int64_t stride, const Shape& shape) {
  Tensor t = Tensor::zeros(shape);
  float* dst = t.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * cols, data + r * stride, sizeof(float) * static_cast<size_t>(cols));
  (*st.capture)(name, t);
}

}  // namespace

void WanDit::Impl::block_forward(int index, DitState& st) {
  const DitConfig& c = cfg;
  const DitBlockWeights& w = blocks[static_cast<size_t>(index)];
  const int64_t L = st.tokens, dim = c.dim, heads = c.num_heads, hd = c.head_dim();
  const float eps = static_cast<float>(c.eps);
  const std::string prefix = "block" + std::to_string(index) + ".";
  const bool bf16 = compute == DType::kBF16;

  // Modulation vectors per unique timestep: [unique_t, 6, dim].
  std::vector<float> mod(static_cast<size_t>(st.unique_t * 6 * dim));
  for (int64_t u = 0; u < st.unique_t; ++u)
    for (int64_t j = 0; j < 6 * dim; ++j)
      mod[static_cast<size_t>(u * 6 * dim + j)] =
          w.modulation[static_cast<size_t>(j)] + st.e0[static_cast<size_t>(u * 6 * dim + j)];
  auto chunk = [&](int64_t u, int k) { return mod.data() + (u * 6 + k) * dim; };

  // LN(x) * (1 + scale) + shift, into act (f32) or act16 (bf16), per timestep run.
  auto norm_modulate = [&](int shift_k, int scale_k) {
    for (const auto& r : st.runs) {
      const float* xr = x.data() + r.begin * dim;
      if (bf16) {
        layer_norm_modulate_rows_bf16(xr, act16.data() + r.begin * dim, r.count, dim,
                                      chunk(r.index, shift_k), chunk(r.index, scale_k), 0, eps);
      } else {
        layer_norm_modulate_rows(xr, act.data() + r.begin * dim, r.count, dim,
                                 chunk(r.index, shift_k), chunk(r.index, scale_k), 0, eps);
      }
    }
  };
  auto gated_add = [&](const float* y, int gate_k) {
    for (const auto& r : st.runs)
      gated_residual_add_rows(x.data() + r.begin * dim, y + r.begin * dim, chunk(r.index, gate_k),
                              r.count, dim, 0);
  };
  const void* act_in = nullptr;
  act.resize(static_cast<size_t>(L * std::max(dim, c.ffn_dim)));
  act16.resize(static_cast<size_t>(L * std::max(dim, c.ffn_dim)));
  act_in = bf16 ? static_cast<const void*>(act16.data()) : static_cast<const void*>(act.data());

  AttentionDims ad{};
  ad.heads = heads;
  ad.head_dim = hd;
  ad.scale = 1.0f / std::sqrt(static_cast<float>(hd));

  // ---- Self-attention.
  {
    profile::ScopedTimer pt("norm+modulate");
    norm_modulate(0, 1);
  }
  qkv.resize(static_cast<size_t>(L * 3 * dim));
  {
    profile::ScopedTimer pt("gemm.qkv");
    w.qkv.forward(act_in, L, qkv.data());
  }  // [L, 3*dim] = q | k | v
  float* q = qkv.data();
  float* k = qkv.data() + dim;
  float* v = qkv.data() + 2 * dim;
  // bf16: the attention kernels' inputs, [L, 3*dim] = q16 | k16 | v16. RoPE writes q16 and k16
  // while each row is in cache (no separate conversion pass over q and k); v is converted below.
  if (bf16) qkv16.resize(static_cast<size_t>(L * 3 * dim));
  {
    profile::ScopedTimer pt("rmsnorm+rope");
    rms_norm_strided(q, L, dim, 3 * dim, w.norm_q, eps);
    rms_norm_strided(k, L, dim, 3 * dim, w.norm_k, eps);
    rope3d_apply(q, L, heads, hd, 3 * dim, st.grid[0], st.grid[1], st.grid[2], rope,
                 bf16 ? qkv16.data() : nullptr, 3 * dim);
    rope3d_apply(k, L, heads, hd, 3 * dim, st.grid[0], st.grid[1], st.grid[2], rope,
                 bf16 ? qkv16.data() + dim : nullptr, 3 * dim);
  }
  if (bf16) {
    profile::ScopedTimer pt("attention.convert");
    const auto stride = static_cast<size_t>(3 * dim);
    convert_float_rows(v, DType::kF32, stride, qkv16.data() + 2 * dim, DType::kBF16, stride,
                       static_cast<size_t>(L), static_cast<size_t>(dim));
  }
  if (st.capture) {
    capture_rows(st, prefix + "q_rope", q, L, dim, 3 * dim, Shape{1, L, heads, hd});
    capture_rows(st, prefix + "k_rope", k, L, dim, 3 * dim, Shape{1, L, heads, hd});
  }
  ad.q_len = L;
  ad.kv_len = L;
  ad.kv_valid = L;
  ad.q_stride = ad.k_stride = ad.v_stride = 3 * dim;
  ad.out_stride = dim;
  attn.resize(static_cast<size_t>(L * dim));
  // A policy's plan (sparse attention); a missing policy or an all-dense plan without
  // diagnostics takes the dense path below, unchanged.
  sparse::AttentionCall call;
  sparse::AttentionPlan plan;
  bool planned = false;
  if (attention) {
    profile::ScopedTimer pt("attention.plan");
    call.layer = index;
    call.layers = c.num_layers;
    call.step = st.step;
    call.steps = st.steps;
    call.timestep = st.timestep;
    call.cfg_branch = st.cfg_branch;
    call.grid = {st.grid[0], st.grid[1], st.grid[2]};
    call.heads = heads;
    call.head_dim = hd;
    call.q = q;
    call.k = k;
    call.stride = 3 * dim;
    if (bf16) {  // the policy's estimators may read the bf16 copies (half the bytes)
      call.q16 = qkv16.data();
      call.k16 = qkv16.data() + dim;
    }
    plan = attention->plan(call);
    planned = !plan.all_dense() || attention_diagnostics != nullptr;
  }
  if (planned) {
    profile::ScopedTimer pt("attention.self");
    sparse::AttentionIo io;
    io.q = q;
    io.k = k;
    io.v = v;
    io.stride = 3 * dim;
    io.tokens = L;
    io.heads = heads;
    io.head_dim = hd;
    io.scale = ad.scale;
    io.bf16 = bf16;
    if (bf16) {
      io.q16 = qkv16.data();
      io.k16 = qkv16.data() + dim;
      io.v16 = qkv16.data() + 2 * dim;
    }
    io.out = attn.data();
    io.out_stride = dim;
    sparse::execute_attention_plan(plan, io, attention_ws, call, attention_diagnostics);
  } else {
    profile::ScopedTimer pt("attention.self");
    if (bf16) {
      flash_attention(qkv16.data(), qkv16.data() + dim, qkv16.data() + 2 * dim, attn.data(), ad);
    } else {
      flash_attention(q, k, v, attn.data(), ad);
    }
  }
  tmp.resize(static_cast<size_t>(L * dim));
  {
    profile::ScopedTimer pt("gemm.o");
    linear_f32_in(w.o, attn.data(), L, tmp.data());
  }  // [L, dim]
  if (st.capture)
    capture_rows(st, prefix + "self_attn_out", tmp.data(), L, dim, dim, Shape{1, L, dim});
  gated_add(tmp.data(), 2);

  // ---- Cross-attention over the padded text (its padding rows as one counted row) and, for i2v,
  // the image tokens.
  if (!w.norm3_weight.empty()) {
    layer_norm_rows(x.data(), act.data(), L, dim, w.norm3_weight.data(), w.norm3_bias.data(), eps);
  } else {
    std::memcpy(act.data(), x.data(), sizeof(float) * static_cast<size_t>(L * dim));
  }
  float* cq = qkv.data();  // reuse: [L, dim]
  {
    profile::ScopedTimer pt("gemm.cross_q");
    linear_f32_in(w.cross_q, act.data(), L, cq);
  }
  rms_norm_strided(cq, L, dim, dim, w.cross_norm_q, eps);
  auto attend = [&](const PackedLinear& kv_proj, const std::vector<float>& norm_k, const float* ctx,
                    int64_t ctx_rows, int64_t last_repeat, float* out) {
    kv.resize(static_cast<size_t>(ctx_rows * 2 * dim));
    {
      profile::ScopedTimer pt("gemm.cross_kv");
      linear_f32_in(kv_proj, ctx, ctx_rows, kv.data());
    }  // [ctx_rows, 2*dim] = k | v
    rms_norm_strided(kv.data(), ctx_rows, dim, 2 * dim, norm_k, eps);
    AttentionDims cd = ad;
    cd.q_len = L;
    cd.kv_len = ctx_rows;
    cd.kv_valid = ctx_rows;
    cd.kv_last_repeat = last_repeat;
    cd.q_stride = dim;
    cd.k_stride = cd.v_stride = 2 * dim;
    cd.out_stride = dim;
    profile::ScopedTimer pt("attention.cross");
    if (bf16) {
      // Only grow: shrinking would make the next block's resize to [L, 3*dim] zero-fill again.
      if (qkv16.size() < static_cast<size_t>(L * dim)) qkv16.resize(static_cast<size_t>(L * dim));
      kv16.resize(static_cast<size_t>(ctx_rows * 2 * dim));
      convert_floats(cq, DType::kF32, qkv16.data(), DType::kBF16, static_cast<size_t>(L * dim));
      convert_floats(kv.data(), DType::kF32, kv16.data(), DType::kBF16,
                     static_cast<size_t>(ctx_rows * 2 * dim));
      flash_attention(qkv16.data(), kv16.data(), kv16.data() + dim, out, cd);
    } else {
      flash_attention(cq, kv.data(), kv.data() + dim, out, cd);
    }
  };
  attend(w.cross_kv, w.cross_norm_k, st.context.data(), st.context_rows, st.context_last_repeat,
         attn.data());
  if (c.kind == DitKind::kI2V) {
    hidden.resize(static_cast<size_t>(L * dim));
    attend(w.cross_kv_img, w.cross_norm_k_img, st.clip.data(), st.clip_rows, 1, hidden.data());
    add_rows(attn.data(), hidden.data(), L * dim);
  }
  {
    profile::ScopedTimer pt("gemm.cross_o");
    linear_f32_in(w.cross_o, attn.data(), L, tmp.data());
  }
  if (st.capture)
    capture_rows(st, prefix + "cross_attn_out", tmp.data(), L, dim, dim, Shape{1, L, dim});
  add_rows(x.data(), tmp.data(), L * dim);

  // ---- FFN.
  {
    profile::ScopedTimer pt("norm+modulate");
    norm_modulate(3, 4);
  }
  if (bf16) {
    // The hidden layer only feeds the next bf16 GEMM: let oneDNN write it as bf16 directly.
    hidden16.resize(static_cast<size_t>(L * c.ffn_dim));
    {
      profile::ScopedTimer pt("gemm.ffn_in");
      w.ffn_in.forward_bf16_out(act_in, L, hidden16.data());  // [L, ffn_dim], GELU fused
    }
    profile::ScopedTimer pt("gemm.ffn_out");
    w.ffn_out.forward(hidden16.data(), L, tmp.data());
  } else {
    hidden.resize(static_cast<size_t>(L * c.ffn_dim));
    {
      profile::ScopedTimer pt("gemm.ffn_in");
      w.ffn_in.forward(act_in, L, hidden.data());  // [L, ffn_dim], GELU fused
    }
    profile::ScopedTimer pt("gemm.ffn_out");
    w.ffn_out.forward(hidden.data(), L, tmp.data());
  }
  if (st.capture) capture_rows(st, prefix + "ffn_out", tmp.data(), L, dim, dim, Shape{1, L, dim});
  gated_add(tmp.data(), 5);
  if (st.capture) capture_rows(st, prefix + "out", x.data(), L, dim, dim, Shape{1, L, dim});
}

}  // namespace vidax::wan
