#include "sparse/sparse_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/token_permute.h"

namespace vidax::sparse {
namespace {

// Contiguous runs [first, last] of a group's sorted head list, so that dense groups can call
// the dense kernel on views.
std::vector<std::pair<int64_t, int64_t>> head_runs(std::vector<int64_t> heads) {
  std::sort(heads.begin(), heads.end());
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const int64_t h : heads) {
    if (!runs.empty() && runs.back().second + 1 == h)
      runs.back().second = h;
    else
      runs.emplace_back(h, h);
  }
  return runs;
}

// bf16 copies of q, k, v as contiguous [tokens, heads * head_dim] (unless the caller gave them).
struct Bf16View {
  const BFloat16* q = nullptr;
  const BFloat16* k = nullptr;
  const BFloat16* v = nullptr;
  int64_t stride = 0;
};
Bf16View bf16_inputs(const AttentionIo& io, AttentionWorkspace& ws) {
  if (io.q16 && io.k16 && io.v16) return {io.q16, io.k16, io.v16, io.stride};
  const int64_t row = io.heads * io.head_dim;
  const size_t n = static_cast<size_t>(io.tokens * row);
  ws.qkv16.resize(3 * n);
  const float* src[] = {io.q, io.k, io.v};
  BFloat16* dst = ws.qkv16.data();
  for (int x = 0; x < 3; ++x)
    convert_float_rows(src[x], DType::kF32, static_cast<size_t>(io.stride),
                       dst + static_cast<size_t>(x) * n, DType::kBF16, static_cast<size_t>(row),
                       static_cast<size_t>(io.tokens), static_cast<size_t>(row));
  return {dst, dst + n, dst + 2 * n, row};
}

// Dense attention of heads [h0, h0 + n) into out (row stride out_stride); b: the bf16 inputs
// when io.bf16.
void dense_heads(const AttentionIo& io, const Bf16View* b, int64_t h0, int64_t n, float* out,
                 int64_t out_stride) {
  AttentionDims d{};
  d.q_len = d.kv_len = d.kv_valid = io.tokens;
  d.heads = n;
  d.head_dim = io.head_dim;
  d.out_stride = out_stride;
  d.scale = io.scale;
  const int64_t off = h0 * io.head_dim;
  if (io.bf16) {
    d.q_stride = d.k_stride = d.v_stride = b->stride;
    flash_attention(b->q + off, b->k + off, b->v + off, out + off, d);
  } else {
    d.q_stride = d.k_stride = d.v_stride = io.stride;
    flash_attention(io.q + off, io.k + off, io.v + off, out + off, d);
  }
}

void sparse_group(const HeadGroup& g, const AttentionIo& io, AttentionWorkspace& ws) {
  const int64_t gh = static_cast<int64_t>(g.heads.size()), hd = io.head_dim;
  const size_t n = static_cast<size_t>(io.tokens * gh * hd);
  const BlockSparseDims d{gh, hd, 0, io.scale};
  // Rows go straight to their native positions and heads in io.out (no scatter pass).
  BlockSparseOutput o;
  o.stride = io.out_stride;
  o.rows = g.layout.identity() ? nullptr : g.layout.perm.data();
  o.heads = g.heads.data();
  o.dest_heads = io.heads;
  // The executor reads q, k, v in place (through the layout's permutation and the group's
  // heads) from the caller's bf16 copies or, in f32 mode, from the f32 rows: no gather pass.
  BlockSparseInput in;
  in.stride = io.stride;
  in.rows = o.rows;
  in.heads = g.heads.data();
  in.src_heads = io.heads;
  if (io.bf16 && io.q16 && io.k16 && io.v16) {
    block_sparse_attention(io.q16, io.k16, io.v16, io.out, g.layout.blocks, g.layout.blocks, g.mask,
                           g.predicate, d, o, in);
  } else if (io.bf16) {
    // No copies given: convert while gathering the group's heads in layout order.
    const StridedRows rows[] = {{io.q, io.tokens, io.heads, hd, io.stride},
                                {io.k, io.tokens, io.heads, hd, io.stride},
                                {io.v, io.tokens, io.heads, hd, io.stride}};
    Buffer<BFloat16>* dst[] = {&ws.q16, &ws.k16, &ws.v16};
    for (int x = 0; x < 3; ++x) {
      dst[x]->resize(n);
      gather_token_heads(rows[x], g.layout.perm, g.heads, dst[x]->data());
    }
    block_sparse_attention(ws.q16.data(), ws.k16.data(), ws.v16.data(), io.out, g.layout.blocks,
                           g.layout.blocks, g.mask, g.predicate, d, o);
  } else {
    block_sparse_attention(io.q, io.k, io.v, io.out, g.layout.blocks, g.layout.blocks, g.mask,
                           g.predicate, d, o, in);
  }
}

// Softmax mass on the kept keys of `samples` query rows of every head, exact in double.
double estimate_recall(const AttentionPlan& plan, const AttentionIo& io, int64_t samples) {
  const int64_t tokens = io.tokens, hd = io.head_dim;
  samples = std::clamp<int64_t>(samples, 1, tokens);
  double total = 0;
  int64_t count = 0;
  std::vector<double> s(static_cast<size_t>(tokens));
  for (const HeadGroup& g : plan.groups) {
    if (g.dense) {
      total += static_cast<double>(g.heads.size() * samples);
      count += static_cast<int64_t>(g.heads.size()) * samples;
      continue;
    }
    const std::vector<int32_t> inv =
        g.layout.identity() ? std::vector<int32_t>{} : inverse_permutation(g.layout.perm);
    auto pos = [&](int64_t t) { return inv.empty() ? t : static_cast<int64_t>(inv[t]); };
    const auto& off = g.layout.blocks.offsets;
    auto block_of = [&](int64_t p) {
      return static_cast<int64_t>(std::upper_bound(off.begin(), off.end(), p) - off.begin()) - 1;
    };
    std::vector<int64_t> kblock(static_cast<size_t>(tokens));
    for (int64_t j = 0; j < tokens; ++j) kblock[static_cast<size_t>(j)] = block_of(pos(j));
    for (size_t gi = 0; gi < g.heads.size(); ++gi) {
      const int64_t h = g.heads[gi];
      for (int64_t r = 0; r < samples; ++r) {
        const int64_t t = r * tokens / samples, qpos = pos(t), qb = block_of(qpos);
        const float* qt = io.q + t * io.stride + h * hd;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < tokens; ++j) {
          const float* kj = io.k + j * io.stride + h * hd;
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c) dot += static_cast<double>(qt[c]) * kj[c];
          s[static_cast<size_t>(j)] = dot * io.scale;
          m = std::max(m, s[static_cast<size_t>(j)]);
        }
        double all = 0, kept = 0;
        for (int64_t j = 0; j < tokens; ++j) {
          const double p = std::exp(s[static_cast<size_t>(j)] - m);
          all += p;
          const TileClass c =
              g.mask.get(static_cast<int64_t>(gi), qb, kblock[static_cast<size_t>(j)]);
          bool keep = c == TileClass::kFull;
          if (c == TileClass::kBoundary) {
            uint8_t k = 0;
            g.predicate(static_cast<int64_t>(gi), qpos, 1, pos(j), 1, &k);
            keep = k != 0;
          }
          if (keep) kept += p;
        }
        total += kept / all;
        ++count;
      }
    }
  }
  return count > 0 ? total / static_cast<double>(count) : 1.0;
}

}  // namespace

void validate_plan(const AttentionPlan& plan, int64_t tokens, int64_t heads) {
  std::vector<int> seen(static_cast<size_t>(heads), 0);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const HeadGroup& g = plan.groups[i];
    if (g.heads.empty()) throw_input_error("attention plan: group ", i, " has no heads");
    for (const int64_t h : g.heads) {
      if (h < 0 || h >= heads)
        throw_input_error("attention plan: group ", i, " names head ", h, " of ", heads);
      if (seen[static_cast<size_t>(h)]++)
        throw_input_error("attention plan: head ", h, " is in two groups");
    }
    if (g.dense) continue;
    if (g.layout.tokens() != tokens ||
        (!g.layout.identity() && static_cast<int64_t>(g.layout.perm.size()) != tokens))
      throw_input_error("attention plan: group ", i, " layout covers ", g.layout.tokens(),
                        " tokens, the call has ", tokens);
    const int64_t nb = g.layout.blocks.blocks();
    if (g.mask.heads() != static_cast<int64_t>(g.heads.size()) || g.mask.q_blocks() != nb ||
        g.mask.k_blocks() != nb)
      throw_input_error("attention plan: group ", i, " mask is ", g.mask.heads(), " x ",
                        g.mask.q_blocks(), " x ", g.mask.k_blocks(), ", expected ", g.heads.size(),
                        " x ", nb, " x ", nb);
    if (!g.mask.rows_built())
      throw_input_error("attention plan: group ", i, " mask rows not built");
  }
  for (int64_t h = 0; h < heads; ++h)
    if (!seen[static_cast<size_t>(h)])
      throw_input_error("attention plan: head ", h, " in no group");
}

double plan_density(const AttentionPlan& plan, int64_t heads) {
  double sum = 0;
  for (const HeadGroup& g : plan.groups) {
    const double n = static_cast<double>(g.heads.size());
    sum += g.dense ? n : n * g.mask.density(g.layout.blocks, g.layout.blocks);
  }
  return heads > 0 ? sum / static_cast<double>(heads) : 1.0;
}

void execute_attention_plan(const AttentionPlan& plan, const AttentionIo& io,
                            AttentionWorkspace& ws, const AttentionCall& call,
                            AttentionDiagnostics* diagnostics) {
  if (!io.q || !io.k || !io.v || !io.out) throw_input_error("attention plan: null q, k, v or out");
  validate_plan(plan, io.tokens, io.heads);
  // The bf16 copies the dense groups (and the diagnostics) read, made once per call.
  bool need16 = io.bf16 && diagnostics != nullptr;
  for (const HeadGroup& g : plan.groups) need16 = need16 || (io.bf16 && g.dense);
  const Bf16View b16 = need16 ? bf16_inputs(io, ws) : Bf16View{};
  for (const HeadGroup& g : plan.groups) {
    if (g.dense) {
      for (const auto& [first, last] : head_runs(g.heads))
        dense_heads(io, &b16, first, last - first + 1, io.out, io.out_stride);
    } else {
      sparse_group(g, io, ws);
    }
  }
  if (!diagnostics) return;
  const int64_t row = io.heads * io.head_dim;
  ws.dense.resize(static_cast<size_t>(io.tokens * row));
  dense_heads(io, &b16, 0, io.heads, ws.dense.data(), row);
  double err = 0, ref = 0;
  for (int64_t t = 0; t < io.tokens; ++t)
    for (int64_t e = 0; e < row; ++e) {
      const double r = ws.dense.data()[t * row + e];
      const double x = io.out[t * io.out_stride + e];
      err += (x - r) * (x - r);
      ref += r * r;
    }
  AttentionRecord rec;
  rec.layer = call.layer;
  rec.step = call.step;
  rec.cfg_branch = call.cfg_branch;
  rec.density = plan_density(plan, io.heads);
  rec.rel_l2 = ref > 0 ? std::sqrt(err / ref) : 0.0;
  rec.recall = estimate_recall(plan, io, diagnostics->sample_rows);
  diagnostics->records.push_back(rec);
}

}  // namespace vidax::sparse
