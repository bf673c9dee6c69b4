#include "sparse/spade_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "sparse/policies.h"
#include "sparse/policy_options.h"

namespace vidax::sparse {

std::vector<BlockShape> SpadeOptions::default_shapes() {
  return {{1, 4, 16}, {1, 8, 8}, {16, 1, 4}, {8, 1, 8}, {4, 2, 8}, {2, 4, 8}};
}

SpadeOptions parse_spade_options(std::string_view options) {
  PolicyOptions o("spade", options);
  SpadeOptions s;
  s.topp = o.number("topp", s.topp, 1e-6, 1.0);
  s.topp_uncond = o.number("topp_uncond", s.topp, 1e-6, 1.0);
  s.topp_early = o.number("topp_early", -1.0, 1e-6, 1.0);
  s.early = o.number("early", s.early, 0.0, 1.0);
  s.topk = o.integer("topk", s.topk, 0, 1 << 24);
  s.dense_layers = o.integer("dense_layers", s.dense_layers, 0, 1 << 16);
  s.sink = o.integer("sink", s.sink, 0, 1 << 24);
  o.finish();
  return s;
}

double mean_block_query_similarity(const AttentionCall& call, int64_t head,
                                   const TokenLayout& layout) {
  const int64_t d = call.head_dim;
  std::vector<double> sum(static_cast<size_t>(d));
  double total = 0;
  int64_t counted = 0;
  for (int64_t b = 0; b < layout.blocks.blocks(); ++b) {
    const int64_t m = layout.blocks.size(b);
    if (m < 2) continue;
    // Mean pairwise cosine = (|sum of unit vectors|^2 - m) / (m (m - 1)).
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t p = layout.blocks.begin(b); p < layout.blocks.begin(b) + m; ++p) {
      const float* q = call.q + layout.original(p) * call.stride + head * d;
      double norm = 0;
      for (int64_t c = 0; c < d; ++c) norm += static_cast<double>(q[c]) * q[c];
      const double inv = norm > 0 ? 1.0 / std::sqrt(norm) : 0.0;
      for (int64_t c = 0; c < d; ++c) sum[static_cast<size_t>(c)] += q[c] * inv;
    }
    const double s2 = std::inner_product(sum.begin(), sum.end(), sum.begin(), 0.0);
    total += (s2 - static_cast<double>(m)) / static_cast<double>(m * (m - 1));
    ++counted;
  }
  return counted ? total / static_cast<double>(counted) : 0.0;
}

std::vector<double> spade_block_estimate(const AttentionCall& call, int64_t head,
                                         const TokenLayout& layout) {
  const int64_t d = call.head_dim, nb = layout.blocks.blocks();
  const auto ud = static_cast<size_t>(d);
  // Block summaries: mean query, per-channel key max and min. [blocks, head_dim] each.
  std::vector<float> qmean(static_cast<size_t>(nb) * ud, 0.0f), kmax(qmean.size()),
      kmin(qmean.size());
  for (int64_t b = 0; b < nb; ++b) {
    float* qm = &qmean[static_cast<size_t>(b) * ud];
    float* hi = &kmax[static_cast<size_t>(b) * ud];
    float* lo = &kmin[static_cast<size_t>(b) * ud];
    std::fill(hi, hi + d, -INFINITY);
    std::fill(lo, lo + d, INFINITY);
    const int64_t m = layout.blocks.size(b);
    for (int64_t p = layout.blocks.begin(b); p < layout.blocks.begin(b) + m; ++p) {
      const int64_t t = layout.original(p);
      const float* q = call.q + t * call.stride + head * d;
      const float* k = call.k + t * call.stride + head * d;
      for (int64_t c = 0; c < d; ++c) {
        qm[c] += q[c];
        hi[c] = std::max(hi[c], k[c]);
        lo[c] = std::min(lo[c], k[c]);
      }
    }
    for (int64_t c = 0; c < d; ++c) qm[c] /= static_cast<float>(m);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> est(static_cast<size_t>(nb * nb));
  for (int64_t qb = 0; qb < nb; ++qb) {
    const float* qm = &qmean[static_cast<size_t>(qb) * ud];
    double* row = &est[static_cast<size_t>(qb * nb)];
    double mx = -INFINITY;
    for (int64_t kb = 0; kb < nb; ++kb) {
      const float* hi = &kmax[static_cast<size_t>(kb) * ud];
      const float* lo = &kmin[static_cast<size_t>(kb) * ud];
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += std::max(qm[c] * hi[c], qm[c] * lo[c]);
      row[kb] = s * scale;
      mx = std::max(mx, row[kb]);
    }
    double z = 0;
    for (int64_t kb = 0; kb < nb; ++kb) {
      row[kb] = static_cast<double>(layout.blocks.size(kb)) * std::exp(row[kb] - mx);
      z += row[kb];
    }
    for (int64_t kb = 0; kb < nb; ++kb) row[kb] /= z;
  }
  return est;
}

SpadePolicy::SpadePolicy(SpadeOptions options) : opt_(std::move(options)) {
  if (opt_.topp_uncond < 0) opt_.topp_uncond = opt_.topp;
  VIDAX_CHECK(!opt_.shapes.empty());
}

std::string SpadePolicy::name() const {
  std::ostringstream s;
  s << "spade:";
  if (opt_.topk > 0)
    s << "topk=" << opt_.topk;
  else
    s << "topp=" << opt_.topp << ",topp_uncond=" << opt_.topp_uncond;
  if (opt_.early > 0 && opt_.topp_early > 0)
    s << ",topp_early=" << opt_.topp_early << ",early=" << opt_.early;
  s << ",dense_layers=" << opt_.dense_layers << ",sink=" << opt_.sink;
  return s.str();
}

double SpadePolicy::topp_for(const AttentionCall& call) const {
  const auto early_steps =
      static_cast<int64_t>(std::floor(opt_.early * static_cast<double>(call.steps)));
  if (call.step < early_steps && opt_.topp_early > 0) return opt_.topp_early;
  return call.cfg_branch == 1 ? opt_.topp_uncond : opt_.topp;
}

const TokenLayout& SpadePolicy::layout_for(const TokenGrid& grid, size_t shape) {
  auto& slots = cache_[{grid.frames, grid.height, grid.width}];
  if (slots.empty()) slots.resize(opt_.shapes.size());
  if (!slots[shape])
    slots[shape] = std::make_unique<TokenLayout>(block3d_layout(grid, opt_.shapes[shape]));
  return *slots[shape];
}

AttentionPlan SpadePolicy::plan(const AttentionCall& call) {
  validate_call(call, "spade");
  AttentionPlan plan;
  if (call.layer < opt_.dense_layers) {
    HeadGroup g;
    g.dense = true;
    for (int64_t h = 0; h < call.heads; ++h) g.heads.push_back(h);
    plan.groups.push_back(std::move(g));
    return plan;
  }
  const size_t shapes = opt_.shapes.size();
  shape_of_.assign(static_cast<size_t>(call.heads), 0);
  similarity_.assign(static_cast<size_t>(call.heads), std::vector<double>(shapes));
  for (int64_t h = 0; h < call.heads; ++h) {
    auto& sim = similarity_[static_cast<size_t>(h)];
    for (size_t s = 0; s < shapes; ++s)
      sim[s] = mean_block_query_similarity(call, h, layout_for(call.grid, s));
    // First best wins ties, so the candidate order is the preference order.
    shape_of_[static_cast<size_t>(h)] =
        static_cast<int>(std::max_element(sim.begin(), sim.end()) - sim.begin());
  }
  const double p = topp_for(call);
  for (size_t s = 0; s < shapes; ++s) {
    HeadGroup g;
    for (int64_t h = 0; h < call.heads; ++h)
      if (shape_of_[static_cast<size_t>(h)] == static_cast<int>(s)) g.heads.push_back(h);
    if (g.heads.empty()) continue;
    g.layout = layout_for(call.grid, s);
    const int64_t nb = g.layout.blocks.blocks();
    g.mask = BlockMask(static_cast<int64_t>(g.heads.size()), nb, nb);
    std::vector<int32_t> order(static_cast<size_t>(nb));
    for (size_t i = 0; i < g.heads.size(); ++i) {
      const auto mi = static_cast<int64_t>(i);
      const auto est = spade_block_estimate(call, g.heads[i], g.layout);
      for (int64_t qb = 0; qb < nb; ++qb) {
        const double* row = &est[static_cast<size_t>(qb * nb)];
        std::iota(order.begin(), order.end(), 0);
        // Descending estimate; equal estimates by block index so the choice is deterministic.
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        double kept = 0;
        for (int64_t r = 0; r < nb; ++r) {
          const bool more = opt_.topk > 0 ? r < opt_.topk : kept < p;
          if (!more) break;
          g.mask.set(mi, qb, order[static_cast<size_t>(r)], TileClass::kFull);
          kept += row[order[static_cast<size_t>(r)]];
        }
        for (int64_t kb = 0; kb < std::min(opt_.sink, nb); ++kb)
          g.mask.set(mi, qb, kb, TileClass::kFull);
        g.mask.set(mi, qb, qb, TileClass::kFull);
      }
    }
    g.mask.build_rows();
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

std::unique_ptr<AttentionPolicy> make_spade_policy(std::string_view options) {
  return std::make_unique<SpadePolicy>(parse_spade_options(options));
}

}  // namespace vidax::sparse
