// One Wan DiT block, as three residual ops on the rows this process holds:
//   x += self_attn(LN(x) * (1 + scale_sa) + shift_sa) * gate_sa
//   x += cross_attn(norm3(x), context)                       (neither modulated nor gated)
//   x += ffn(LN(x) * (1 + scale_ffn) + shift_ffn) * gate_ffn
// with (shift_sa, scale_sa, gate_sa, shift_ffn, scale_ffn, gate_ffn) = modulation + e0.
// Every op is per row except self-attention, which needs the whole sequence: under a
// sequence-parallel mesh it goes through dist/sequence_parallel.h (Ulysses / ring); in one process
// it calls attention_core directly.
// Under tensor parallelism (tp = T) a rank computes its H/T heads and ffn_dim/T hidden units:
// `ldim` = dim/T columns of q, k, v and of the attention outputs; the row-split o, cross-o and
// FFN-out give partial sums that reduce_partial completes (dist/tensor_parallel.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/convert.h"
#include "core/profile.h"
#include "dist/mesh.h"
#include "dist/tensor_parallel.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/flash_attention.h"
#include "models/wan/dit_impl.h"

namespace vidax::wan {
namespace {

void capture_rows(const DitState& st, const std::string& name, const float* data, int64_t rows,
                  int64_t cols, int64_t stride, const Shape& shape) {
  Tensor t = Tensor::zeros(shape);
  float* dst = t.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * cols, data + r * stride, sizeof(float) * static_cast<size_t>(cols));
  (*st.capture)(name, t);
}

std::string block_prefix(int index) { return "block" + std::to_string(index) + "."; }

}  // namespace

void WanDit::Impl::block_forward(int index, DitState& st) {
  const int64_t dim = cfg.dim, rows = st.shard.per_rank;
  const DitBlockWeights& w = blocks->acquire(index);  // waits when streamed and not loaded yet
  // Modulation vectors per unique timestep: [unique_t, 6, dim].
  std::vector<float> mod(static_cast<size_t>(st.unique_t * 6 * dim));
  for (int64_t u = 0; u < st.unique_t; ++u)
    for (int64_t j = 0; j < 6 * dim; ++j)
      mod[static_cast<size_t>(u * 6 * dim + j)] =
          w.modulation[static_cast<size_t>(j)] + st.e0[static_cast<size_t>(u * 6 * dim + j)];
  act.resize(static_cast<size_t>(rows * std::max(dim, cfg.ffn_dim)));
  act16.resize(static_cast<size_t>(rows * std::max(dim, cfg.ffn_dim)));

  self_attention(index, w, st, mod.data());
  cross_attention(index, w, st);
  feed_forward(index, w, st, mod.data());
  blocks->release(index);  // a streamed block's memory goes to the next load
  if (st.capture)
    capture_rows(st, block_prefix(index) + "out", x.data(), rows, dim, dim,
                 Shape{1, st.tokens, dim});
}

namespace {

// LN(x) * (1 + scale) + shift per timestep run, into act (f32) or act16 (bf16).
void norm_modulate(const DitState& st, const float* x, float* act, BFloat16* act16, bool bf16,
                   int64_t dim, const float* mod, int shift_k, int scale_k, float eps) {
  profile::ScopedTimer pt("norm+modulate");
  auto chunk = [&](int64_t u, int k) { return mod + (u * 6 + k) * dim; };
  for (const auto& r : st.runs) {
    const float* xr = x + r.begin * dim;
    if (bf16) {
      layer_norm_modulate_rows_bf16(xr, act16 + r.begin * dim, r.count, dim,
                                    chunk(r.index, shift_k), chunk(r.index, scale_k), 0, eps);
    } else {
      layer_norm_modulate_rows(xr, act + r.begin * dim, r.count, dim, chunk(r.index, shift_k),
                               chunk(r.index, scale_k), 0, eps);
    }
  }
}

void gated_add(const DitState& st, float* x, const float* y, int64_t dim, const float* mod,
               int gate_k) {
  for (const auto& r : st.runs)
    gated_residual_add_rows(x + r.begin * dim, y + r.begin * dim,
                            mod + (r.index * 6 + gate_k) * dim, r.count, dim, 0);
}

}  // namespace

template <typename T>
void WanDit::Impl::attention_core(int index, const DitState& st, const T* q, const T* k, const T* v,
                                  const float* q32, const float* k32, const float* v32,
                                  int64_t stride, int64_t tokens, int64_t heads, int64_t first_head,
                                  float* out, int64_t out_stride) {
  constexpr bool kBf16 = std::is_same_v<T, BFloat16>;
  const int64_t hd = cfg.head_dim();
  sparse::AttentionCall call;  // what a policy sees (sparse/attention_policy.h)
  call.layer = index;
  call.layers = cfg.num_layers;
  call.step = st.step;
  call.steps = st.steps;
  call.timestep = st.timestep;
  call.cfg_branch = st.cfg_branch;
  call.grid = {st.grid[0], st.grid[1], st.grid[2]};
  call.heads = heads;
  call.first_head = first_head;
  call.model_heads = cfg.num_heads;
  call.head_dim = hd;
  call.q = q32;
  call.k = k32;
  call.stride = stride;
  sparse::AttentionIo io;
  io.q = q32;
  io.k = k32;
  io.v = v32;
  io.stride = stride;
  io.tokens = tokens;
  io.heads = heads;
  io.head_dim = hd;
  io.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  io.bf16 = kBf16;
  if constexpr (kBf16) {  // the policy's estimators may read the bf16 copies (half the bytes)
    call.q16 = io.q16 = q;
    call.k16 = io.k16 = k;
    io.v16 = v;
  }
  io.out = out;
  io.out_stride = out_stride;
  self_attn.run(call, io);
}

void WanDit::Impl::self_attention(int index, const DitBlockWeights& w, DitState& st,
                                  const float* mod) {
  const DitConfig& c = cfg;
  const int64_t rows = st.shard.per_rank, dim = c.dim, hd = c.head_dim();
  const int64_t heads = c.num_heads / tp.size, ldim = heads * hd;  // this rank's heads
  const int64_t head0 = static_cast<int64_t>(tp.rank) * heads;     // model index of its first
  const float eps = static_cast<float>(c.eps);
  const bool bf16 = compute == DType::kBF16;
  const std::string prefix = block_prefix(index);

  norm_modulate(st, x.data(), act.data(), act16.data(), bf16, dim, mod, 0, 1, eps);
  const void* act_in =
      bf16 ? static_cast<const void*>(act16.data()) : static_cast<const void*>(act.data());
  qkv.resize(static_cast<size_t>(rows * 3 * ldim));
  {
    profile::ScopedTimer pt("gemm.qkv");
    if (!hooked_linear(st, index, LinearSite::kQkv, w.qkv, act_in, bf16, rows, qkv.data()))
      w.qkv.forward(act_in, rows, qkv.data());
  }  // [rows, 3*ldim] = q | k | v of this rank's heads
  float* q = qkv.data();
  float* k = qkv.data() + ldim;
  float* v = qkv.data() + 2 * ldim;
  // bf16: the attention kernels' inputs, [rows, 3*ldim] = q16 | k16 | v16. RoPE writes q16 and k16
  // while each row is in cache (no separate conversion pass over q and k); v is converted below.
  if (bf16) qkv16.resize(static_cast<size_t>(rows * 3 * ldim));
  {
    profile::ScopedTimer pt("rmsnorm+rope");
    norm_heads(q, rows, 3 * ldim, w.norm_q);
    norm_heads(k, rows, 3 * ldim, w.norm_k);
    if (st.active == nullptr) {
      // A cached chunk sits at its absolute frames (the grid extended to cover them).
      const bool cached = st.kv_cache != nullptr;
      const int64_t first = cached ? st.causal_first_token : st.shard.first;
      const int64_t grid_f =
          cached ? st.causal_first_token / (st.grid[1] * st.grid[2]) + st.grid[0] : st.grid[0];
      rope3d_apply(q, rows, heads, hd, 3 * ldim, grid_f, st.grid[1], st.grid[2], rope,
                   bf16 ? qkv16.data() : nullptr, 3 * ldim, first);
      rope3d_apply(k, rows, heads, hd, 3 * ldim, grid_f, st.grid[1], st.grid[2], rope,
                   bf16 ? qkv16.data() + ldim : nullptr, 3 * ldim, first);
    } else {  // a token subset: each stretch of consecutive tokens at its own positions
      const std::vector<int64_t>& tk = *st.active;
      for (int64_t r = 0; r < rows;) {
        int64_t n = 1;
        while (r + n < rows && tk[static_cast<size_t>(r + n)] == tk[static_cast<size_t>(r)] + n)
          ++n;
        const int64_t off = r * 3 * ldim;
        rope3d_apply(q + off, n, heads, hd, 3 * ldim, st.grid[0], st.grid[1], st.grid[2], rope,
                     bf16 ? qkv16.data() + off : nullptr, 3 * ldim, tk[static_cast<size_t>(r)]);
        rope3d_apply(k + off, n, heads, hd, 3 * ldim, st.grid[0], st.grid[1], st.grid[2], rope,
                     bf16 ? qkv16.data() + off + ldim : nullptr, 3 * ldim,
                     tk[static_cast<size_t>(r)]);
        r += n;
      }
    }
  }
  if (bf16) {
    profile::ScopedTimer pt("attention.convert");
    const auto stride = static_cast<size_t>(3 * ldim);
    convert_float_rows(v, DType::kF32, stride, qkv16.data() + 2 * ldim, DType::kBF16, stride,
                       static_cast<size_t>(rows), static_cast<size_t>(ldim));
  }
  if (st.capture) {
    capture_rows(st, prefix + "q_rope", q, rows, ldim, 3 * ldim, Shape{1, rows, heads, hd});
    capture_rows(st, prefix + "k_rope", k, rows, ldim, 3 * ldim, Shape{1, rows, heads, hd});
  }
  attn.resize(static_cast<size_t>(rows * ldim));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (kv_store_on) {
    // Keep this call's keys and values (the subset's rows, or every row) in the branch's store.
    const size_t b = static_cast<size_t>(st.cfg_branch == 1 ? 1 : 0),
                 layer = static_cast<size_t>(index);
    const int64_t L = st.tokens;
    const auto n = static_cast<size_t>(L * 2 * ldim);
    auto token_of = [&](int64_t r) {
      return st.active != nullptr ? (*st.active)[static_cast<size_t>(r)] : r;
    };
    profile::ScopedTimer pt("attention.kv_store");
    if (bf16) {
      Buffer<BFloat16>& store = kv_store16[b][layer];
      store.resize(n);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(store.data() + token_of(r) * 2 * ldim, qkv16.data() + r * 3 * ldim + ldim,
                    sizeof(BFloat16) * static_cast<size_t>(2 * ldim));
    } else {
      Buffer<float>& store = kv_store32[b][layer];
      store.resize(n);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(store.data() + token_of(r) * 2 * ldim, qkv.data() + r * 3 * ldim + ldim,
                    sizeof(float) * static_cast<size_t>(2 * ldim));
    }
  }
  if (st.kv_cache != nullptr) {
    causal_cached_attention(index, st, heads, ldim);
  } else if (st.block_causal_tokens > 0) {
    // Chunk b's queries over the keys of chunks 0..b (contiguous from row 0).
    profile::ScopedTimer pt("attention.block_causal");
    for (int64_t b0 = 0; b0 < rows; b0 += st.block_causal_tokens) {
      AttentionDims d{};
      d.q_len = std::min(st.block_causal_tokens, rows - b0);
      d.kv_len = d.kv_valid = b0 + d.q_len;
      d.heads = heads;
      d.head_dim = hd;
      d.q_stride = d.k_stride = d.v_stride = 3 * ldim;
      d.out_stride = ldim;
      d.scale = scale;
      if (bf16) {
        flash_attention(qkv16.data() + b0 * 3 * ldim, qkv16.data() + ldim, qkv16.data() + 2 * ldim,
                        attn.data() + b0 * ldim, d);
      } else {
        flash_attention(q + b0 * 3 * ldim, k, v, attn.data() + b0 * ldim, d);
      }
    }
  } else if (st.active != nullptr) {
    // The subset's queries over every token's keys and values (fresh rows for the subset, the
    // kept ones for the rest).
    const size_t b = static_cast<size_t>(st.cfg_branch == 1 ? 1 : 0),
                 layer = static_cast<size_t>(index);
    profile::ScopedTimer pt("attention.subset");
    if (bf16) {
      attend_to_kv_rows(kv_store16[b][layer].data(), rows, st.tokens, heads, ldim);
    } else {
      attend_to_kv_rows(kv_store32[b][layer].data(), rows, st.tokens, heads, ldim);
    }
  } else if (!sequence_parallel()) {
    if (bf16) {
      attention_core<BFloat16>(index, st, qkv16.data(), qkv16.data() + ldim,
                               qkv16.data() + 2 * ldim, q, k, v, 3 * ldim, rows, heads, head0,
                               attn.data(), ldim);
    } else {
      attention_core<float>(index, st, q, k, v, q, k, v, 3 * ldim, rows, heads, head0, attn.data(),
                            ldim);
    }
  } else if (bf16) {
    // Policies estimate from f32 q and k: under Ulysses a bf16 run exchanges those too (only
    // when a policy runs), so the plan is the one a single process makes.
    Buffer<float>& f32_heads = sp_f32_heads;  // [U * rows][3][heads / U][hd]
    const int64_t width = heads / ctx.mesh->ulysses().size() * hd;
    const bool exchange_f32 = self_attn.has_policy();
    if (exchange_f32)
      ulysses_to_heads<float>(ctx.mesh->ulysses(), q, 3 * ldim, rows, heads, hd, sp_ws.send32,
                              f32_heads);
    AttentionCore<BFloat16> core = [&](const BFloat16* cq, const BFloat16* ck, const BFloat16* cv,
                                       int64_t stride, int64_t tokens, int64_t h, int64_t first,
                                       float* out, int64_t os) {
      const float* q32 = exchange_f32 ? f32_heads.data() : nullptr;
      attention_core<BFloat16>(index, st, cq, ck, cv, q32, q32 ? q32 + width : nullptr,
                               q32 ? q32 + 2 * width : nullptr, stride, tokens, h, head0 + first,
                               out, os);
    };
    sequence_parallel_attention<BFloat16>(*ctx.mesh, st.shard, qkv16.data(), 3 * ldim, heads, hd,
                                          scale, core, attn.data(), ldim, sp_ws);
  } else {
    AttentionCore<float> core = [&](const float* cq, const float* ck, const float* cv,
                                    int64_t stride, int64_t tokens, int64_t h, int64_t first,
                                    float* out, int64_t os) {
      attention_core<float>(index, st, cq, ck, cv, cq, ck, cv, stride, tokens, h, head0 + first,
                            out, os);
    };
    sequence_parallel_attention<float>(*ctx.mesh, st.shard, q, 3 * ldim, heads, hd, scale, core,
                                       attn.data(), ldim, sp_ws);
  }
  tmp.resize(static_cast<size_t>(rows * dim));
  {
    profile::ScopedTimer pt("gemm.o");
    if (!hooked_linear(st, index, LinearSite::kO, w.o, attn.data(), false, rows, tmp.data()))
      linear_f32_in(w.o, attn.data(), rows, tmp.data());
  }  // [rows, dim] (a partial sum under tp)
  reduce_partial(w.o, tmp.data(), rows);
  if (st.capture)
    capture_rows(st, prefix + "self_attn_out", tmp.data(), rows, dim, dim, Shape{1, rows, dim});
  gated_add(st, x.data(), tmp.data(), dim, mod, 2);
}

// Cross-attention over the padded text (its padding rows as one counted row) and, for i2v, the
// image tokens. Per row: under a sequence-parallel mesh every rank attends its own rows to the
// whole (replicated) context.
void WanDit::Impl::cross_attention(int index, const DitBlockWeights& w, DitState& st) {
  const DitConfig& c = cfg;
  const int64_t rows = st.shard.per_rank, dim = c.dim, hd = c.head_dim();
  const int64_t heads = c.num_heads / tp.size, ldim = heads * hd;  // this rank's heads
  const float eps = static_cast<float>(c.eps);
  const bool bf16 = compute == DType::kBF16;
  if (!w.norm3_weight.empty()) {
    layer_norm_rows(x.data(), act.data(), rows, dim, w.norm3_weight.data(), w.norm3_bias.data(),
                    eps);
  } else {
    std::memcpy(act.data(), x.data(), sizeof(float) * static_cast<size_t>(rows * dim));
  }
  float* cq = qkv.data();  // reuse: [rows, ldim]
  {
    profile::ScopedTimer pt("gemm.cross_q");
    if (!hooked_linear(st, index, LinearSite::kCrossQ, w.cross_q, act.data(), false, rows, cq))
      linear_f32_in(w.cross_q, act.data(), rows, cq);
  }
  norm_heads(cq, rows, ldim, w.cross_norm_q);
  AttentionDims ad{};
  ad.heads = heads;
  ad.head_dim = hd;
  ad.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Keys and values of the context rows come from the cache (CrossKvEntry), computed on the
  // first call that sees this context: [ctx_rows, 2*ldim] = k | v, in the dtype attention reads.
  auto attend = [&](const PackedLinear& kv_proj, const std::vector<float>& norm_k,
                    const float* ctx_rows_data, int64_t ctx_rows, int64_t last_repeat, float* out,
                    Buffer<float>& kv_f32, Buffer<BFloat16>& kv_bf16, uint8_t& done) {
    const auto n = static_cast<size_t>(ctx_rows * 2 * ldim);
    if (!done) {
      kv.resize(n);
      {
        profile::ScopedTimer pt("gemm.cross_kv");
        linear_f32_in(kv_proj, ctx_rows_data, ctx_rows, kv.data());
      }
      norm_heads(kv.data(), ctx_rows, 2 * ldim, norm_k);
      if (bf16) {
        kv_bf16.resize(n);
        convert_floats(kv.data(), DType::kF32, kv_bf16.data(), DType::kBF16, n);
      } else {
        kv_f32.resize(n);
        std::memcpy(kv_f32.data(), kv.data(), sizeof(float) * n);
      }
      done = 1;
    }
    AttentionDims cd = ad;
    cd.q_len = rows;
    cd.kv_len = ctx_rows;
    cd.kv_valid = ctx_rows;
    cd.kv_last_repeat = last_repeat;
    cd.q_stride = ldim;
    cd.k_stride = cd.v_stride = 2 * ldim;
    cd.out_stride = ldim;
    profile::ScopedTimer pt("attention.cross");
    if (bf16) {
      qkv16.resize(static_cast<size_t>(rows * ldim));  // Buffer: grows only, never zero-fills
      convert_floats(cq, DType::kF32, qkv16.data(), DType::kBF16, static_cast<size_t>(rows * ldim));
      flash_attention(qkv16.data(), kv_bf16.data(), kv_bf16.data() + ldim, out, cd);
    } else {
      flash_attention(cq, kv_f32.data(), kv_f32.data() + ldim, out, cd);
    }
  };
  CrossKvEntry& cache = *st.cross_kv;
  const auto b = static_cast<size_t>(index);
  attend(w.cross_kv, w.cross_norm_k, st.context.data(), st.context_rows, st.context_last_repeat,
         attn.data(), cache.text[b], cache.text16[b], cache.text_done[b]);
  if (c.image_branch()) {
    hidden.resize(static_cast<size_t>(rows * ldim));
    attend(w.cross_kv_img, w.cross_norm_k_img, st.clip.data(), st.clip_rows, 1, hidden.data(),
           cache.image[b], cache.image16[b], cache.image_done[b]);
    add_rows(attn.data(), hidden.data(), rows * ldim);
  }
  {
    profile::ScopedTimer pt("gemm.cross_o");
    if (!hooked_linear(st, index, LinearSite::kCrossO, w.cross_o, attn.data(), false, rows,
                       tmp.data()))
      linear_f32_in(w.cross_o, attn.data(), rows, tmp.data());
  }  // [rows, dim] (a partial sum under tp)
  reduce_partial(w.cross_o, tmp.data(), rows);
  if (st.capture)
    capture_rows(st, block_prefix(index) + "cross_attn_out", tmp.data(), rows, dim, dim,
                 Shape{1, rows, dim});
  add_rows(x.data(), tmp.data(), rows * dim);
}

void WanDit::Impl::feed_forward(int index, const DitBlockWeights& w, DitState& st,
                                const float* mod) {
  const DitConfig& c = cfg;
  const int64_t rows = st.shard.per_rank, dim = c.dim;
  const int64_t hidden_dim = c.ffn_dim / tp.size;  // this rank's hidden units
  const bool bf16 = compute == DType::kBF16;
  norm_modulate(st, x.data(), act.data(), act16.data(), bf16, dim, mod, 3, 4,
                static_cast<float>(c.eps));
  const void* act_in =
      bf16 ? static_cast<const void*>(act16.data()) : static_cast<const void*>(act.data());
  if (bf16) {
    // The hidden layer only feeds the next bf16 GEMM: let oneDNN write it as bf16 directly.
    hidden16.resize(static_cast<size_t>(rows * hidden_dim));
    {
      profile::ScopedTimer pt("gemm.ffn_in");
      if (!hooked_linear(st, index, LinearSite::kFfnIn, w.ffn_in, act_in, true, rows, nullptr,
                         hidden16.data()))
        w.ffn_in.forward_bf16_out(act_in, rows, hidden16.data());  // [rows, hidden], GELU fused
    }
    profile::ScopedTimer pt("gemm.ffn_out");
    if (!hooked_linear(st, index, LinearSite::kFfnOut, w.ffn_out, hidden16.data(), true, rows,
                       tmp.data()))
      w.ffn_out.forward(hidden16.data(), rows, tmp.data());
  } else {
    hidden.resize(static_cast<size_t>(rows * hidden_dim));
    {
      profile::ScopedTimer pt("gemm.ffn_in");
      if (!hooked_linear(st, index, LinearSite::kFfnIn, w.ffn_in, act_in, false, rows,
                         hidden.data()))
        w.ffn_in.forward(act_in, rows, hidden.data());  // [rows, hidden_dim], GELU fused
    }
    profile::ScopedTimer pt("gemm.ffn_out");
    if (!hooked_linear(st, index, LinearSite::kFfnOut, w.ffn_out, hidden.data(), false, rows,
                       tmp.data()))
      w.ffn_out.forward(hidden.data(), rows, tmp.data());
  }  // [rows, dim] (a partial sum under tp)
  reduce_partial(w.ffn_out, tmp.data(), rows);
  if (st.capture)
    capture_rows(st, block_prefix(index) + "ffn_out", tmp.data(), rows, dim, dim,
                 Shape{1, rows, dim});
  gated_add(st, x.data(), tmp.data(), dim, mod, 5);
}

// This call's queries (in qkv16 / qkv) over `keys` rows of k | v ([keys, 2 * ldim], the dtype
// attention reads), densely, into attn: a token subset over the key/value store, a cached chunk
// over its cache.
template <typename T>
void WanDit::Impl::attend_to_kv_rows(const T* kv, int64_t rows, int64_t keys, int64_t heads,
                                     int64_t ldim) {
  const int64_t hd = cfg.head_dim();
  AttentionDims d{};
  d.q_len = rows;
  d.kv_len = d.kv_valid = keys;
  d.heads = heads;
  d.head_dim = hd;
  d.q_stride = 3 * ldim;
  d.k_stride = d.v_stride = 2 * ldim;
  d.out_stride = ldim;
  d.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if constexpr (std::is_same_v<T, BFloat16>) {
    flash_attention(qkv16.data(), kv, kv + ldim, attn.data(), d);
  } else {
    flash_attention(qkv.data(), kv, kv + ldim, attn.data(), d);
  }
}

// A cached chunk (DitSample::kv_cache): its keys / values go into the cache's slot (after the
// eviction of a rolling cache), then its queries attend to every valid row of the cache: densely,
// or under PBSA (sparse/pbsa.h) to the blocks its mask keeps, after measuring the saliency of
// the cached blocks.
void WanDit::Impl::causal_cached_attention(int index, DitState& st, int64_t heads, int64_t ldim) {
  const int64_t rows = st.shard.per_rank, hd = cfg.head_dim();
  const bool bf16 = compute == DType::kBF16;
  CausalKvCache& kc = *st.kv_cache;
  const KvCacheSlot& slot = st.slot;
  profile::ScopedTimer pt("attention.kv_cache");
  kc.evict(index, slot);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto row = static_cast<size_t>(2 * ldim);
  void* cache = bf16 ? static_cast<void*>(kc.rows16(index)) : static_cast<void*>(kc.rows32(index));
  for (int64_t r = 0; r < rows; ++r) {  // k | v of the row
    const size_t dst = static_cast<size_t>(slot.write_begin + r) * row;
    if (bf16) {
      std::memcpy(static_cast<BFloat16*>(cache) + dst, qkv16.data() + r * 3 * ldim + ldim,
                  sizeof(BFloat16) * row);
    } else {
      std::memcpy(static_cast<float*>(cache) + dst, qkv.data() + r * 3 * ldim + ldim,
                  sizeof(float) * row);
    }
  }
  const int64_t keys = slot.local_end;
  const sparse::PbsaOptions* pbsa = st.pbsa;
  if (pbsa != nullptr && pbsa->samples > 0) {
    profile::ScopedTimer pm("attention.pbsa_saliency");
    if (bf16) {
      sparse::sampled_key_mass(qkv.data(), 3 * ldim, rows, static_cast<const BFloat16*>(cache),
                               2 * ldim, keys, heads, hd, scale, pbsa->samples, st.key_mass.data());
    } else {
      sparse::sampled_key_mass(qkv.data(), 3 * ldim, rows, static_cast<const float*>(cache),
                               2 * ldim, keys, heads, hd, scale, pbsa->samples, st.key_mass.data());
    }
  }
  const KvCacheOptions& co = kc.options();
  int64_t persistent = 0;
  for (const KvBlock& p : slot.persistent) persistent += p.rows;
  const int64_t sink = std::min(co.sink_frames * co.frame_tokens, slot.write_begin - persistent);
  const int64_t window_begin = sink + persistent;
  // PBSA's key blocks: the sink, the persistent blocks and the chunk's own rows always
  // attended, the window's earlier frames in blocks of `block` tokens chosen per query block.
  std::vector<sparse::PbsaKeyBlock> kb;
  int64_t optional = 0;
  if (pbsa != nullptr) {
    const int64_t b = pbsa->block;
    auto add_span = [&](int64_t begin, int64_t end, bool always, int64_t first_token) {
      for (int64_t r = begin; r < end;) {  // blocks within each frame of absolute tokens
        const int64_t t = first_token + (r - begin);
        const int64_t frame_end = (t / co.frame_tokens + 1) * co.frame_tokens;
        const int64_t n = std::min({b, end - r, frame_end - t});
        kb.push_back({r, n, always});
        optional += always ? 0 : 1;
        r += n;
      }
    };
    add_span(0, sink, true, 0);
    for (int64_t r = sink; const KvBlock& p : slot.persistent) {
      kb.push_back({r, p.rows, true});
      r += p.rows;
    }
    add_span(window_begin, slot.write_begin, false,
             slot.global_end - (slot.local_end - window_begin));
    add_span(slot.write_begin, keys, true, slot.start);
  }
  // Dense when every block is kept anyway (density 1, or no earlier window frame yet): the dense
  // kernel is the faster one over the same keys, in the same order.
  const bool every_block =
      pbsa == nullptr || std::ceil(pbsa->density * static_cast<double>(optional) - 1e-9) >=
                             static_cast<double>(optional);
  if (every_block) {
    if (bf16) {
      attend_to_kv_rows(static_cast<const BFloat16*>(cache), rows, keys, heads, ldim);
    } else {
      attend_to_kv_rows(static_cast<const float*>(cache), rows, keys, heads, ldim);
    }
    return;
  }
  BlockPartition kp;
  kp.offsets.push_back(0);
  for (const auto& k : kb) kp.offsets.push_back(k.begin + k.rows);
  const BlockPartition qp = BlockPartition::uniform(rows, pbsa->block);
  BlockSparseDims d;
  d.heads = heads;
  d.head_dim = hd;
  d.kv_valid = keys;
  d.scale = scale;
  BlockSparseInput in;
  in.stride = 2 * ldim;  // q is copied into rows of the cache's width
  profile::ScopedTimer ps("attention.pbsa");
  // The mask, then the chunk's q copied into rows of the cache's width, then the executor.
  auto run = [&](const auto* c, auto& q_rows, const auto* q_src) {
    const BlockMask mask =
        sparse::pbsa_mask(qkv.data(), 3 * ldim, qp, c, 2 * ldim, kb, heads, hd, pbsa->density);
    q_rows.resize(static_cast<size_t>(rows) * row);
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(q_src + r * 3 * ldim, ldim, q_rows.data() + static_cast<size_t>(r) * row);
    block_sparse_attention(q_rows.data(), c, c + ldim, attn.data(), qp, kp, mask, nullptr, d, {},
                           in);
  };
  if (bf16) {
    run(static_cast<const BFloat16*>(cache), pbsa_q16, qkv16.data());
  } else {
    run(static_cast<const float*>(cache), pbsa_q32, qkv.data());
  }
}

void WanDit::Impl::norm_heads(float* x, int64_t rows, int64_t stride,
                              const std::vector<float>& weight) {
  if (weight.empty()) return;
  tp_rms_norm(tp.size > 1 ? &ctx.mesh->tp() : nullptr, x, rows, static_cast<int64_t>(weight.size()),
              stride, cfg.dim, weight.data(), static_cast<float>(cfg.eps), tp_sums);
}

void WanDit::Impl::reduce_partial(const Linear& linear, float* y, int64_t rows) {
  if (tp.size == 1) return;  // the whole sum, bias included, came out of the GEMM
  profile::ScopedTimer pt("tp.all_reduce");
  const std::vector<float>& bias = linear.bias_after_reduce();
  tp_reduce_rows(ctx.mesh->tp(), y, rows, linear.out_features(),
                 bias.empty() ? nullptr : bias.data());
}

}  // namespace vidax::wan
