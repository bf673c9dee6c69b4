#include "sparse/spade_policy.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/elementwise.h"
#include "sparse/block_select.h"
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
  s.topk_uncond = o.integer("topk_uncond", s.topk, 0, 1 << 24);
  s.topk_early = o.integer("topk_early", -1, 0, 1 << 24);
  s.dense_layers = o.integer("dense_layers", s.dense_layers, 0, 1 << 16);
  s.sink = o.integer("sink", s.sink, 0, 1 << 24);
  s.shape_every = o.integer("shape_every", s.shape_every, 1, 1 << 20);
  o.finish();
  return s;
}

namespace {

// The estimators read f32 q/k or the bf16 copies the bf16 kernels see (AttentionCall::q16);
// a bf16 value widens to f32 exactly (a shift), so both go through the same f32 arithmetic.
[[gnu::always_inline]] inline float to_f32(float x) { return x; }
[[gnu::always_inline]] inline float to_f32(BFloat16 x) { return bf16_to_f32(x.bits); }

// 1 / |q| over d channels (0 for a zero row). Always inlined, so each target clone of its
// callers gets its own vectorized copy; 16 independent partial sums so the loop vectorizes.
template <class T>
[[gnu::always_inline]] inline float inverse_l2_norm(const T* q, int64_t d) {
  float lanes[16] = {};
  int64_t c = 0;
  for (; c + 16 <= d; c += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += to_f32(q[c + l]) * to_f32(q[c + l]);
  float norm = 0;
  for (const float v : lanes) norm += v;
  for (; c < d; ++c) norm += to_f32(q[c]) * to_f32(q[c]);
  return norm > 0 ? 1.0f / std::sqrt(norm) : 0.0f;
}

// Unit-normalized queries of one head: [tokens, head_dim] (zero rows stay zero).
std::vector<float> unit_queries(const AttentionCall& call, int64_t head) {
  const int64_t n = call.grid.tokens(), d = call.head_dim;
  std::vector<float> u(static_cast<size_t>(n * d));
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const float* q = call.q + t * call.stride + head * d;
    const float inv = inverse_l2_norm(q, d);
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

namespace {

// The estimate from block summaries: qs rows [q+ | q-] of the query blocks' mean query, ks rows
// [k_max | k_min] of the key blocks, both [nb, 2d]; sizes = tokens per block.
// Rows of est [nb, nb]: softmax over kb of score / sqrt(d), each term weighted by the key
// block's token count.
// One row's estimate numerators: w[kb] = size[kb] * exp(scale * s[kb] - max) (e: scratch [nb]).
void size_weighted_exp_row(const float* s, const std::vector<int64_t>& sizes, float scale, float* e,
                           double* w) {
  const auto nb = static_cast<int64_t>(sizes.size());
  float mx = -INFINITY;
  for (int64_t kb = 0; kb < nb; ++kb) mx = std::max(mx, s[kb] * scale);
  for (int64_t kb = 0; kb < nb; ++kb) e[kb] = s[kb] * scale - mx;
  exp_f32(e, e, nb);
  for (int64_t kb = 0; kb < nb; ++kb)
    w[kb] = static_cast<double>(sizes[static_cast<size_t>(kb)]) * static_cast<double>(e[kb]);
}

std::vector<double> softmax_by_size(const std::vector<float>& score,
                                    const std::vector<int64_t>& sizes, int64_t d) {
  const auto nb = static_cast<int64_t>(sizes.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<double> est(static_cast<size_t>(nb * nb));
#pragma omp parallel
  {
    std::vector<float> e(static_cast<size_t>(nb));
#pragma omp for schedule(static)
    for (int64_t qb = 0; qb < nb; ++qb) {
      double* row = &est[static_cast<size_t>(qb * nb)];
      size_weighted_exp_row(&score[static_cast<size_t>(qb * nb)], sizes, scale, e.data(), row);
      double z = 0;
      for (int64_t kb = 0; kb < nb; ++kb) z += row[kb];
      for (int64_t kb = 0; kb < nb; ++kb) row[kb] /= z;
    }
  }
  return est;
}

std::vector<double> estimate_from_summaries(const std::vector<float>& qs,
                                            const std::vector<float>& ks,
                                            const std::vector<int64_t>& sizes, int64_t d) {
  const auto nb = static_cast<int64_t>(sizes.size());
  std::vector<float> score(static_cast<size_t>(nb * nb));
  gemm_abt(qs.data(), nb, ks.data(), nb, 2 * d, score.data());
  return softmax_by_size(score, sizes, d);
}

// [q+ | q-] of a block's query sum over m tokens, and [max | min] of its keys, as rows of 2d.
__attribute__((target_clones("avx512f", "default"))) void summary_rows(const float* qsum,
                                                                       const float* hi,
                                                                       const float* lo, int64_t m,
                                                                       int64_t d, float* qrow,
                                                                       float* krow) {
  for (int64_t c = 0; c < d; ++c) {
    const float v = qsum[c] / static_cast<float>(m);
    qrow[c] = std::max(v, 0.0f);
    qrow[d + c] = std::min(v, 0.0f);
    krow[c] = hi[c];
    krow[d + c] = lo[c];
  }
}

}  // namespace

std::vector<double> spade_block_estimate(const AttentionCall& call, int64_t head,
                                         const TokenLayout& layout) {
  const int64_t d = call.head_dim, nb = layout.blocks.blocks();
  const auto ud = static_cast<size_t>(d);
  // max(q c_hi, q c_lo) = max(q, 0) c_hi + min(q, 0) c_lo, so the bound is one GEMM:
  // [q+ | q-] [q_blocks, 2 d] . [k_max | k_min] [k_blocks, 2 d]^T.
  std::vector<float> qs(static_cast<size_t>(nb) * 2 * ud), ks(qs.size());
  std::vector<int64_t> sizes(static_cast<size_t>(nb));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    std::vector<float> qm(ud, 0.0f), hi(ud, -INFINITY), lo(ud, INFINITY);
    const int64_t m = layout.blocks.size(b);
    sizes[static_cast<size_t>(b)] = m;
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
    summary_rows(qm.data(), hi.data(), lo.data(), m, d, &qs[static_cast<size_t>(b) * 2 * ud],
                 &ks[static_cast<size_t>(b) * 2 * ud]);
  }
  return estimate_from_summaries(qs, ks, sizes, d);
}

SpadeSummaries::SpadeSummaries(const TokenGrid& grid, const std::vector<BlockShape>& shapes)
    : grid_(grid), shapes_(shapes) {
  validate_grid(grid, "spade summaries");
  VIDAX_CHECK(!shapes.empty());
  run_ = {shapes[0].t, shapes[0].h, shapes[0].w};
  for (const auto& s : shapes) {
    VIDAX_CHECK(s.t > 0 && s.h > 0 && s.w > 0);
    run_[0] = std::gcd(run_[0], s.t);
    run_[1] = std::gcd(run_[1], s.h);
    run_[2] = std::gcd(run_[2], s.w);
  }
  offset_.push_back(0);
  for (const auto& s : shapes) {
    Geometry g;
    g.nt = (grid.frames + s.t - 1) / s.t;
    g.nh = (grid.height + s.h - 1) / s.h;
    g.nw = (grid.width + s.w - 1) / s.w;
    for (int64_t bt = 0; bt < g.nt; ++bt)
      for (int64_t bh = 0; bh < g.nh; ++bh)
        for (int64_t bw = 0; bw < g.nw; ++bw)
          g.sizes.push_back((std::min(grid.frames, (bt + 1) * s.t) - bt * s.t) *
                            (std::min(grid.height, (bh + 1) * s.h) - bh * s.h) *
                            (std::min(grid.width, (bw + 1) * s.w) - bw * s.w));
    offset_.push_back(offset_.back() + static_cast<int64_t>(g.sizes.size()));
    geo_.push_back(std::move(g));
  }
}

int64_t SpadeSummaries::block_of(size_t shape, int64_t f, int64_t y, int64_t x) const {
  const auto& s = shapes_[shape];
  const auto& g = geo_[shape];
  return ((f / s.t) * g.nh + y / s.h) * g.nw + x / s.w;
}

namespace {

constexpr int64_t kAhead = 16;  // tokens prefetched ahead in the strided passes

// The hot loops of the summaries, compiled for AVX-512 and for the baseline and chosen at load
// time (the loops are plain; the compiler vectorizes each clone for its target), for f32 and
// bf16 rows (distinct names: one target_clones function per input type).
template <class T>
[[gnu::always_inline]] inline void add_rows_impl(float* acc, const T* v, int64_t d) {
  for (int64_t c = 0; c < d; ++c) acc[c] += to_f32(v[c]);
}
template <class T>
[[gnu::always_inline]] inline void add_unit_and_raw_impl(const T* q, int64_t d, float* unit,
                                                         float* raw) {
  const float inv = inverse_l2_norm(q, d);
  for (int64_t i = 0; i < d; ++i) {
    unit[i] += to_f32(q[i]) * inv;
    raw[i] += to_f32(q[i]);
  }
}
template <class T>
[[gnu::always_inline]] inline void max_min_rows_impl(float* hi, float* lo, const T* v, int64_t d) {
  for (int64_t c = 0; c < d; ++c) {
    hi[c] = std::max(hi[c], to_f32(v[c]));
    lo[c] = std::min(lo[c], to_f32(v[c]));
  }
}
#define VIDAX_SPADE_CLONES __attribute__((target_clones("avx512f", "default")))
VIDAX_SPADE_CLONES void add_rows_f32(float* acc, const float* v, int64_t d) {
  add_rows_impl(acc, v, d);
}
VIDAX_SPADE_CLONES void add_rows_bf16(float* acc, const BFloat16* v, int64_t d) {
  add_rows_impl(acc, v, d);
}
VIDAX_SPADE_CLONES void add_unit_and_raw_f32(const float* q, int64_t d, float* unit, float* raw) {
  add_unit_and_raw_impl(q, d, unit, raw);
}
VIDAX_SPADE_CLONES void add_unit_and_raw_bf16(const BFloat16* q, int64_t d, float* unit,
                                              float* raw) {
  add_unit_and_raw_impl(q, d, unit, raw);
}
VIDAX_SPADE_CLONES void max_min_rows_f32(float* hi, float* lo, const float* v, int64_t d) {
  max_min_rows_impl(hi, lo, v, d);
}
VIDAX_SPADE_CLONES void max_min_rows_bf16(float* hi, float* lo, const BFloat16* v, int64_t d) {
  max_min_rows_impl(hi, lo, v, d);
}
#undef VIDAX_SPADE_CLONES
void add_rows(float* acc, const float* v, int64_t d) { add_rows_f32(acc, v, d); }
void add_rows(float* acc, const BFloat16* v, int64_t d) { add_rows_bf16(acc, v, d); }
void add_unit_and_raw(const float* q, int64_t d, float* unit, float* raw) {
  add_unit_and_raw_f32(q, d, unit, raw);
}
void add_unit_and_raw(const BFloat16* q, int64_t d, float* unit, float* raw) {
  add_unit_and_raw_bf16(q, d, unit, raw);
}
void max_min_rows(float* hi, float* lo, const float* v, int64_t d) {
  max_min_rows_f32(hi, lo, v, d);
}
void max_min_rows(float* hi, float* lo, const BFloat16* v, int64_t d) {
  max_min_rows_bf16(hi, lo, v, d);
}

// A block's run of `count` consecutive tokens (rows `stride` apart): acc += their sum, or hi / lo
// = the per-channel max / min with them.
template <class T>
void add_run(float* acc, const T* v, int64_t stride, int64_t count, int64_t d) {
  for (int64_t r = 0; r < count; ++r) add_rows(acc, v + r * stride, d);
}
template <class T>
void max_min_run(float* hi, float* lo, const T* v, int64_t stride, int64_t count, int64_t d) {
  for (int64_t r = 0; r < count; ++r) max_min_rows(hi, lo, v + r * stride, d);
}

}  // namespace

const std::vector<int64_t>& SpadeSummaries::column_blocks(size_t shape) {
  if (columns_.size() != shapes_.size()) columns_.assign(shapes_.size(), {});
  auto& c = columns_[shape];
  if (c.empty())
    for (int64_t x = 0; x < grid_.width; ++x) c.push_back(x / shapes_[shape].w);
  return c;
}

template <class T, class Fn>
void SpadeSummaries::for_each_token_run(const T* x, int64_t stride, int64_t head, size_t shape,
                                        Fn&& fn) {
  const int64_t d = d_, H = grid_.height, W = grid_.width, bw = shapes_[shape].w;
  const std::vector<int64_t>& column = column_blocks(shape);
  for (int64_t f = 0; f < grid_.frames; ++f)
    for (int64_t y = 0; y < H; ++y) {
      const int64_t row = block_of(shape, f, y, 0);
      for (int64_t c = 0; c < W; c += bw) {
        const int64_t t = (f * H + y) * W + c, count = std::min(bw, W - c);
        // The rows of one head are short pieces of a wide buffer: fetch a few tokens ahead.
        for (int64_t a = t + kAhead; a < std::min(t + kAhead + count, grid_.tokens()); ++a) {
          const char* ahead = reinterpret_cast<const char*>(x + a * stride + head * d);
          for (int64_t b = 0; b < d * static_cast<int64_t>(sizeof(T)); b += 64)
            __builtin_prefetch(ahead + b);
        }
        fn(row + column[static_cast<size_t>(c)], x + t * stride + head * d, count);
      }
    }
}

void SpadeSummaries::query_sums(const AttentionCall& call, int64_t head, bool unit,
                                int only_shape) {
  VIDAX_CHECK(call.grid == grid_);
  VIDAX_CHECK(only_shape < 0 || (!unit && only_shape < static_cast<int>(shapes_.size())));
  const int64_t d = call.head_dim, total = offset_.back();
  const auto ud = static_cast<size_t>(d);
  d_ = d;
  raw_.resize(static_cast<size_t>(total) * ud);  // zeroed below: all, or only_shape's rows
  unit_.assign(unit ? static_cast<size_t>(total) * ud : 0, 0.0f);
  const int64_t H = grid_.height, W = grid_.width;
  if (only_shape >= 0) {
    // One shape's raw sums, token by token into its block (the other shapes' rows are stale).
    const auto s = static_cast<size_t>(only_shape);
    std::fill(raw_.begin() + offset_[s] * d, raw_.begin() + offset_[s + 1] * d, 0.0f);
    auto sum_runs = [&](const auto* x) {
      for_each_token_run(x, call.stride, head, s, [&](int64_t block, const auto* q, int64_t count) {
        add_run(&raw_[static_cast<size_t>(offset_[s] + block) * ud], q, call.stride, count, d);
      });
    };
    if (call.q16)
      sum_runs(call.q16);
    else
      sum_runs(call.q);
    return;
  }
  std::fill(raw_.begin(), raw_.end(), 0.0f);
  std::vector<float> ru(ud), rr(ud);
  // Tokens in native order, a run of run_[2] consecutive tokens of a row at a time: every
  // shape's width is a multiple of the run, so a run lies in one block of every shape and its
  // sums go to each shape's accumulator once.
  for (size_t s = 0; s < shapes_.size(); ++s) column_blocks(s);
  std::vector<int64_t> row_base(shapes_.size());  // per shape: first block of grid row (f, y)
  auto pass = [&](const auto* qs) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(qs)>>;
    for (int64_t f = 0; f < grid_.frames; ++f)
      for (int64_t y = 0; y < H; ++y) {
        for (size_t s = 0; s < shapes_.size(); ++s) row_base[s] = offset_[s] + block_of(s, f, y, 0);
        for (int64_t x0 = 0; x0 < W; x0 += run_[2]) {
          const int64_t x1 = std::min(W, x0 + run_[2]);
          std::fill(ru.begin(), ru.end(), 0.0f);
          std::fill(rr.begin(), rr.end(), 0.0f);
          for (int64_t x = x0; x < x1; ++x) {
            const int64_t t = (f * H + y) * W + x;
            // The rows of one head are short pieces of a wide buffer: fetch a few tokens ahead.
            if (t + kAhead < grid_.tokens()) {
              const char* ahead =
                  reinterpret_cast<const char*>(qs + (t + kAhead) * call.stride + head * d);
              for (int64_t b = 0; b < d * static_cast<int64_t>(sizeof(T)); b += 64)
                __builtin_prefetch(ahead + b);
            }
            const T* q = qs + t * call.stride + head * d;
            if (unit)
              add_unit_and_raw(q, d, ru.data(), rr.data());
            else
              add_rows(rr.data(), q, d);
          }
          for (size_t s = 0; s < shapes_.size(); ++s) {
            const auto at =
                static_cast<size_t>(row_base[s] + columns_[s][static_cast<size_t>(x0)]) * ud;
            add_rows(&raw_[at], rr.data(), d);
            if (unit) add_rows(&unit_[at], ru.data(), d);
          }
        }
      }
  };
  if (call.q16)
    pass(call.q16);
  else
    pass(call.q);
}

double SpadeSummaries::similarity(size_t shape) const {
  VIDAX_CHECK(!unit_.empty());
  const auto& g = geo_[shape];
  double total = 0;
  int64_t counted = 0;
  for (size_t b = 0; b < g.sizes.size(); ++b) {
    const int64_t m = g.sizes[b];
    if (m < 2) continue;
    const float* u = &unit_[static_cast<size_t>(offset_[shape] + static_cast<int64_t>(b)) *
                            static_cast<size_t>(d_)];
    double s2 = 0;
    for (int64_t c = 0; c < d_; ++c) s2 += static_cast<double>(u[c]) * u[c];
    // Mean pairwise cosine = (|sum of unit vectors|^2 - m) / (m (m - 1)).
    total += (s2 - static_cast<double>(m)) / static_cast<double>(m * (m - 1));
    ++counted;
  }
  return counted ? total / static_cast<double>(counted) : 0.0;
}

void SpadeSummaries::block_scores(const AttentionCall& call, int64_t head, size_t shape) {
  const int64_t d = call.head_dim;
  const auto ud = static_cast<size_t>(d);
  VIDAX_CHECK(d == d_ && call.grid == grid_);
  const auto& g = geo_[shape];
  const int64_t nb = static_cast<int64_t>(g.sizes.size());
  hi_.assign(static_cast<size_t>(nb) * ud, -INFINITY);
  lo_.assign(hi_.size(), INFINITY);
  // Keys in native order, straight into their block's max / min rows (the rows of one block
  // row of the grid stay in L1: at most width / shape.w blocks of 2 x head_dim floats).
  auto max_min_runs = [&](const auto* x) {
    for_each_token_run(
        x, call.stride, head, shape, [&](int64_t block, const auto* k, int64_t count) {
          max_min_run(&hi_[static_cast<size_t>(block) * ud], &lo_[static_cast<size_t>(block) * ud],
                      k, call.stride, count, d);
        });
  };
  if (call.k16)
    max_min_runs(call.k16);
  else
    max_min_runs(call.k);
  qs_.resize(static_cast<size_t>(nb) * 2 * ud);
  ks_.resize(qs_.size());
  for (int64_t b = 0; b < nb; ++b)
    summary_rows(&raw_[static_cast<size_t>(offset_[shape] + b) * ud],
                 &hi_[static_cast<size_t>(b) * ud], &lo_[static_cast<size_t>(b) * ud],
                 g.sizes[static_cast<size_t>(b)], d, &qs_[static_cast<size_t>(b) * 2 * ud],
                 &ks_[static_cast<size_t>(b) * 2 * ud]);
  score_.resize(static_cast<size_t>(nb * nb));
  gemm_abt(qs_.data(), nb, ks_.data(), nb, 2 * d, score_.data());
}

std::vector<double> SpadeSummaries::estimate(const AttentionCall& call, int64_t head,
                                             size_t shape) {
  block_scores(call, head, shape);
  return softmax_by_size(score_, geo_[shape].sizes, call.head_dim);
}

void SpadeSummaries::select(const AttentionCall& call, int64_t head, size_t shape, double p,
                            int64_t topk, int64_t sink, std::vector<uint64_t>& keep) {
  block_scores(call, head, shape);
  const auto& sizes = geo_[shape].sizes;
  const auto nb = static_cast<int64_t>(sizes.size());
  const int64_t words = (nb + 63) / 64;
  keep.assign(static_cast<size_t>(nb * words), 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(call.head_dim));
  std::vector<float> key(static_cast<size_t>(nb)), log_size(static_cast<size_t>(nb));
  std::vector<double> w(topk > 0 ? 0 : static_cast<size_t>(nb));
  for (int64_t kb = 0; kb < nb; ++kb)
    log_size[static_cast<size_t>(kb)] =
        std::log(static_cast<float>(sizes[static_cast<size_t>(kb)]));
  for (int64_t qb = 0; qb < nb; ++qb) {
    const float* s = &score_[static_cast<size_t>(qb * nb)];
    uint64_t* bits = &keep[static_cast<size_t>(qb * words)];
    if (topk > 0) {
      // size * exp(scale s - max) orders like scale s + ln(size), which cannot underflow.
      for (int64_t kb = 0; kb < nb; ++kb)
        key[static_cast<size_t>(kb)] = s[kb] * scale + log_size[static_cast<size_t>(kb)];
      select_top_k(key.data(), nb, topk, bits);
    } else {
      // The estimate's numerators (the share p does not need the division).
      size_weighted_exp_row(s, sizes, scale, key.data(), w.data());
      select_top_p(w.data(), nb, p, bits);
    }
    for (int64_t kb = 0; kb < std::min(sink, nb); ++kb) bits[kb / 64] |= uint64_t{1} << (kb % 64);
    bits[qb / 64] |= uint64_t{1} << (qb % 64);
  }
}

SpadePolicy::SpadePolicy(SpadeOptions options) : opt_(std::move(options)) {
  if (opt_.topp_uncond < 0) opt_.topp_uncond = opt_.topp;
  if (opt_.topk_uncond < 0) opt_.topk_uncond = opt_.topk;
  VIDAX_CHECK(!opt_.shapes.empty());
}

std::string SpadePolicy::name() const {
  std::ostringstream s;
  s << "spade:";
  if (opt_.topk > 0)
    s << "topk=" << opt_.topk;
  else
    s << "topp=" << opt_.topp << ",topp_uncond=" << opt_.topp_uncond;
  if (opt_.topk_uncond != opt_.topk) s << ",topk_uncond=" << opt_.topk_uncond;
  if (opt_.topk > 0 && opt_.topk_uncond == 0) s << ",topp_uncond=" << opt_.topp_uncond;
  if (opt_.early > 0 && opt_.topp_early > 0) s << ",topp_early=" << opt_.topp_early;
  if (opt_.early > 0 && opt_.topk_early >= 0) s << ",topk_early=" << opt_.topk_early;
  if (opt_.early > 0 && (opt_.topp_early > 0 || opt_.topk_early >= 0)) s << ",early=" << opt_.early;
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

int64_t SpadePolicy::topk_for(const AttentionCall& call) const {
  const auto early_steps =
      static_cast<int64_t>(std::floor(opt_.early * static_cast<double>(call.steps)));
  if (call.step < early_steps && opt_.topk_early >= 0) return opt_.topk_early;
  return call.cfg_branch == 1 ? opt_.topk_uncond : opt_.topk;
}

std::vector<std::unique_ptr<SpadeSummaries>>& SpadePolicy::summaries_for(const TokenGrid& grid) {
  auto& pool = summaries_[{grid.frames, grid.height, grid.width}];
  const auto threads = static_cast<size_t>(std::max(1, omp_get_max_threads()));
  while (pool.size() < threads) pool.push_back(std::make_unique<SpadeSummaries>(grid, opt_.shapes));
  return pool;
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
  // Per head, one pass over its queries sums every candidate shape's blocks (unit vectors for
  // the similarity when choosing shapes, raw queries for the estimate); heads in parallel, each
  // thread with its own accumulators.
  auto& pool = summaries_for(call.grid);
  std::vector<std::vector<uint64_t>> keeps(static_cast<size_t>(call.heads));
  for (size_t s = 0; s < shapes; ++s) layout_for(call.grid, s);  // built before the parallel loop
  const double p = topp_for(call);
  const int64_t topk = topk_for(call);
  if (reshaped_) {
    shape_of_.assign(static_cast<size_t>(call.heads), 0);
    similarity_.assign(static_cast<size_t>(call.heads), std::vector<double>(shapes));
  } else {
    shape_of_ = cached->second.shapes;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t h = 0; h < call.heads; ++h) {
    SpadeSummaries& sums = *pool[static_cast<size_t>(omp_get_thread_num())];
    // Shapes kept from an earlier step: only the head's own shape needs query sums.
    sums.query_sums(call, h, reshaped_, reshaped_ ? -1 : shape_of_[static_cast<size_t>(h)]);
    if (reshaped_) {
      auto& sim = similarity_[static_cast<size_t>(h)];
      for (size_t s = 0; s < shapes; ++s) sim[s] = sums.similarity(s);
      // First best wins ties, so the candidate order is the preference order.
      shape_of_[static_cast<size_t>(h)] =
          static_cast<int>(std::max_element(sim.begin(), sim.end()) - sim.begin());
    }
    // Select row by row while the head's scores are in cache; keep only the bit rows.
    sums.select(call, h, static_cast<size_t>(shape_of_[static_cast<size_t>(h)]), p, topk, opt_.sink,
                keeps[static_cast<size_t>(h)]);
  }
  if (reshaped_) choices_[key] = Choice{call.step, shape_of_};
  for (size_t s = 0; s < shapes; ++s) {
    HeadGroup g;
    for (int64_t h = 0; h < call.heads; ++h)
      if (shape_of_[static_cast<size_t>(h)] == static_cast<int>(s)) g.heads.push_back(h);
    if (g.heads.empty()) continue;
    g.layout = layout_for(call.grid, s);
    const int64_t nb = g.layout.blocks.blocks();
    g.mask = BlockMask(static_cast<int64_t>(g.heads.size()), nb, nb);
    const int64_t words = (nb + 63) / 64;
    for (size_t i = 0; i < g.heads.size(); ++i) {
      const auto& keep = keeps[static_cast<size_t>(g.heads[i])];
      for (int64_t qb = 0; qb < nb; ++qb)
        g.mask.set_full_bits(static_cast<int64_t>(i), qb, &keep[static_cast<size_t>(qb * words)]);
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
