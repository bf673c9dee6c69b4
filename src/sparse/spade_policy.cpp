#include "sparse/spade_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "kernels/cpu/elementwise.h"
#include "sparse/estimator_math.h"
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
  s.shape_every = o.integer("shape_every", s.shape_every, 1, 1 << 20);
  o.finish();
  return s;
}

namespace {

// Unit-normalized queries of one head: [tokens, head_dim] (zero rows stay zero).
std::vector<float> unit_queries(const AttentionCall& call, int64_t head) {
  const int64_t n = call.grid.tokens(), d = call.head_dim;
  std::vector<float> u(static_cast<size_t>(n * d));
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const float* q = call.q + t * call.stride + head * d;
    float lanes[16] = {};  // independent partial sums so the compiler vectorizes
    int64_t c = 0;
    for (; c + 16 <= d; c += 16)
      for (int l = 0; l < 16; ++l) lanes[l] += q[c + l] * q[c + l];
    float norm = 0;
    for (const float v : lanes) norm += v;
    for (; c < d; ++c) norm += q[c] * q[c];
    const float inv = norm > 0 ? 1.0f / std::sqrt(norm) : 0.0f;
    for (int64_t c = 0; c < d; ++c) u[static_cast<size_t>(t * d + c)] = q[c] * inv;
  }
  return u;
}

double block_similarity(const std::vector<float>& unit, int64_t d, const TokenLayout& layout) {
  const int64_t nb = layout.blocks.blocks();
  double total = 0;
  int64_t counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, counted)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t m = layout.blocks.size(b);
    if (m < 2) continue;
    // Mean pairwise cosine = (|sum of unit vectors|^2 - m) / (m (m - 1)).
    std::vector<float> sum(static_cast<size_t>(d), 0.0f);
    for (int64_t p = layout.blocks.begin(b); p < layout.blocks.begin(b) + m; ++p) {
      const float* u = &unit[static_cast<size_t>(layout.original(p) * d)];
      for (int64_t c = 0; c < d; ++c) sum[static_cast<size_t>(c)] += u[c];
    }
    double s2 = 0;
    for (const float v : sum) s2 += static_cast<double>(v) * v;
    total += (s2 - static_cast<double>(m)) / static_cast<double>(m * (m - 1));
    ++counted;
  }
  return counted ? total / static_cast<double>(counted) : 0.0;
}

}  // namespace

double mean_block_query_similarity(const AttentionCall& call, int64_t head,
                                   const TokenLayout& layout) {
  return block_similarity(unit_queries(call, head), call.head_dim, layout);
}

std::vector<double> spade_block_estimate(const AttentionCall& call, int64_t head,
                                         const TokenLayout& layout) {
  const int64_t d = call.head_dim, nb = layout.blocks.blocks();
  const auto ud = static_cast<size_t>(d);
  // max(q c_hi, q c_lo) = max(q, 0) c_hi + min(q, 0) c_lo, so the bound is one GEMM:
  // [q+ | q-] [q_blocks, 2 d] . [k_max | k_min] [k_blocks, 2 d]^T.
  std::vector<float> qs(static_cast<size_t>(nb) * 2 * ud), ks(qs.size());
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    std::vector<float> qm(ud, 0.0f), hi(ud, -INFINITY), lo(ud, INFINITY);
    const int64_t m = layout.blocks.size(b);
    for (int64_t p = layout.blocks.begin(b); p < layout.blocks.begin(b) + m; ++p) {
      const int64_t t = layout.original(p);
      const float* q = call.q + t * call.stride + head * d;
      const float* k = call.k + t * call.stride + head * d;
      for (size_t c = 0; c < ud; ++c) {
        qm[c] += q[c];
        hi[c] = std::max(hi[c], k[c]);
        lo[c] = std::min(lo[c], k[c]);
      }
    }
    float* qrow = &qs[static_cast<size_t>(b) * 2 * ud];
    float* krow = &ks[static_cast<size_t>(b) * 2 * ud];
    for (size_t c = 0; c < ud; ++c) {
      const float v = qm[c] / static_cast<float>(m);
      qrow[c] = std::max(v, 0.0f);
      qrow[ud + c] = std::min(v, 0.0f);
      krow[c] = hi[c];
      krow[ud + c] = lo[c];
    }
  }
  std::vector<float> score(static_cast<size_t>(nb * nb));
  gemm_abt(qs.data(), nb, ks.data(), nb, 2 * d, score.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<double> est(static_cast<size_t>(nb * nb));
#pragma omp parallel for schedule(static)
  for (int64_t qb = 0; qb < nb; ++qb) {
    const float* s = &score[static_cast<size_t>(qb * nb)];
    double* row = &est[static_cast<size_t>(qb * nb)];
    std::vector<float> e(static_cast<size_t>(nb));
    float mx = -INFINITY;
    for (int64_t kb = 0; kb < nb; ++kb) mx = std::max(mx, s[kb] * scale);
    for (int64_t kb = 0; kb < nb; ++kb) e[static_cast<size_t>(kb)] = s[kb] * scale - mx;
    exp_f32(e.data(), e.data(), nb);
    double z = 0;
    for (int64_t kb = 0; kb < nb; ++kb) {
      row[kb] = static_cast<double>(layout.blocks.size(kb)) * e[static_cast<size_t>(kb)];
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
  if (opt_.shape_every > 1) s << ",shape_every=" << opt_.shape_every;
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
  // Reuse the shapes chosen at an earlier step of the same (layer, branch, grid) within
  // shape_every steps.
  const std::array<int64_t, 5> key{call.layer, call.cfg_branch, call.grid.frames, call.grid.height,
                                   call.grid.width};
  const auto cached = choices_.find(key);
  reshaped_ = opt_.shape_every == 1 || cached == choices_.end() ||
              call.step < cached->second.step ||
              call.step - cached->second.step >= opt_.shape_every ||
              static_cast<int64_t>(cached->second.shapes.size()) != call.heads;
  if (!reshaped_) {
    shape_of_ = cached->second.shapes;
  } else {
    shape_of_.assign(static_cast<size_t>(call.heads), 0);
    similarity_.assign(static_cast<size_t>(call.heads), std::vector<double>(shapes));
    for (int64_t h = 0; h < call.heads; ++h) {
      auto& sim = similarity_[static_cast<size_t>(h)];
      const std::vector<float> unit = unit_queries(call, h);
      for (size_t s = 0; s < shapes; ++s)
        sim[s] = block_similarity(unit, call.head_dim, layout_for(call.grid, s));
      // First best wins ties, so the candidate order is the preference order.
      shape_of_[static_cast<size_t>(h)] =
          static_cast<int>(std::max_element(sim.begin(), sim.end()) - sim.begin());
    }
    choices_[key] = Choice{call.step, shape_of_};
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
    std::vector<uint8_t> keep(static_cast<size_t>(nb * nb));
    for (size_t i = 0; i < g.heads.size(); ++i) {
      const auto est = spade_block_estimate(call, g.heads[i], g.layout);
      std::fill(keep.begin(), keep.end(), 0);
#pragma omp parallel for schedule(dynamic, 16)
      for (int64_t qb = 0; qb < nb; ++qb) {
        const double* row = &est[static_cast<size_t>(qb * nb)];
        uint8_t* k = &keep[static_cast<size_t>(qb * nb)];
        // Descending estimate; equal estimates by block index so the choice is deterministic.
        std::vector<std::pair<double, int32_t>> order(static_cast<size_t>(nb));
        for (int64_t kb = 0; kb < nb; ++kb)
          order[static_cast<size_t>(kb)] = {row[kb], static_cast<int32_t>(kb)};
        const auto before = [](const std::pair<double, int32_t>& a,
                               const std::pair<double, int32_t>& b) {
          return a.first > b.first || (a.first == b.first && a.second < b.second);
        };
        if (opt_.topk > 0) {
          const auto k_end = order.begin() + std::min<int64_t>(opt_.topk, nb);
          std::partial_sort(order.begin(), k_end, order.end(), before);
          for (auto it = order.begin(); it != k_end; ++it) k[it->second] = 1;
        } else {
          // The shortest prefix of the descending order whose mass reaches p, found by
          // halving with nth_element (linear on average) instead of sorting the whole row.
          int64_t lo = 0, hi = nb;
          double kept = 0;
          while (lo < hi && kept < p) {
            if (hi - lo <= 32) {
              std::sort(order.begin() + lo, order.begin() + hi, before);
              for (int64_t r = lo; r < hi && kept < p; ++r) {
                k[order[static_cast<size_t>(r)].second] = 1;
                kept += order[static_cast<size_t>(r)].first;
              }
              break;
            }
            const int64_t mid = lo + (hi - lo) / 2;
            std::nth_element(order.begin() + lo, order.begin() + mid, order.begin() + hi, before);
            double left = 0;
            for (int64_t r = lo; r < mid; ++r) left += order[static_cast<size_t>(r)].first;
            if (kept + left >= p) {
              hi = mid;
            } else {
              for (int64_t r = lo; r < mid; ++r) k[order[static_cast<size_t>(r)].second] = 1;
              kept += left;
              lo = mid;
            }
          }
        }
        for (int64_t kb = 0; kb < std::min(opt_.sink, nb); ++kb) k[kb] = 1;
        k[qb] = 1;
      }
      for (int64_t qb = 0; qb < nb; ++qb)
        for (int64_t kb = 0; kb < nb; ++kb)
          if (keep[static_cast<size_t>(qb * nb + kb)])
            g.mask.set(static_cast<int64_t>(i), qb, kb, TileClass::kFull);
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
