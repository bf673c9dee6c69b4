#include "sparse/spade_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "core/convert.h"
#include "core/error.h"
#include "sparse/policies.h"
#include "sparse/policy_test_util.h"

namespace vidax::sparse {
namespace {

using testing::CallData;

// Frame-major token lists of the 3D blocks of `shape`, boxes in raster order over the block grid,
// enumerated straight from the grid (no layout tables).
std::vector<std::vector<int64_t>> boxes(const TokenGrid& g, const BlockShape& s) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t t0 = 0; t0 < g.frames; t0 += s.t)
    for (int64_t y0 = 0; y0 < g.height; y0 += s.h)
      for (int64_t x0 = 0; x0 < g.width; x0 += s.w) {
        out.emplace_back();
        for (int64_t f = t0; f < std::min(g.frames, t0 + s.t); ++f)
          for (int64_t y = y0; y < std::min(g.height, y0 + s.h); ++y)
            for (int64_t x = x0; x < std::min(g.width, x0 + s.w); ++x)
              out.back().push_back((f * g.height + y) * g.width + x);
      }
  return out;
}

// The documented rule, straight: per box the mean query and per-channel key max/min, the bound
// score, softmax weighted by box size, top-p (or top-k) by descending weight, plus sink and
// diagonal.
std::vector<uint8_t> reference_mask(CallData& d, int64_t head, const BlockShape& shape, double p,
                                    int64_t topk, int64_t sink) {
  const auto bx = boxes(d.call.grid, shape);
  const auto nb = static_cast<int64_t>(bx.size());
  const int64_t dim = d.call.head_dim;
  std::vector<uint8_t> keep(static_cast<size_t>(nb * nb), 0);
  for (int64_t qb = 0; qb < nb; ++qb) {
    std::vector<double> qm(static_cast<size_t>(dim), 0.0);
    for (const int64_t t : bx[static_cast<size_t>(qb)])
      for (int64_t c = 0; c < dim; ++c) qm[static_cast<size_t>(c)] += d.qrow(t, head)[c];
    for (auto& v : qm)
      v = static_cast<float>(v) / static_cast<float>(bx[static_cast<size_t>(qb)].size());
    std::vector<double> w(static_cast<size_t>(nb));
    for (int64_t kb = 0; kb < nb; ++kb) {
      double s = 0;
      for (int64_t c = 0; c < dim; ++c) {
        float hi = -INFINITY, lo = INFINITY;
        for (const int64_t t : bx[static_cast<size_t>(kb)]) {
          hi = std::max(hi, d.krow(t, head)[c]);
          lo = std::min(lo, d.krow(t, head)[c]);
        }
        const auto q = static_cast<float>(qm[static_cast<size_t>(c)]);
        s += std::max(q * hi, q * lo);
      }
      w[static_cast<size_t>(kb)] = s / std::sqrt(static_cast<double>(dim));
    }
    const double mx = *std::max_element(w.begin(), w.end());
    double z = 0;
    for (int64_t kb = 0; kb < nb; ++kb) {
      w[static_cast<size_t>(kb)] = static_cast<double>(bx[static_cast<size_t>(kb)].size()) *
                                   std::exp(w[static_cast<size_t>(kb)] - mx);
      z += w[static_cast<size_t>(kb)];
    }
    std::vector<int64_t> order(static_cast<size_t>(nb));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return w[static_cast<size_t>(a)] > w[static_cast<size_t>(b)];
    });
    double cum = 0;
    for (int64_t r = 0; r < nb && (topk > 0 ? r < topk : cum < p); ++r) {
      keep[static_cast<size_t>(qb * nb + order[static_cast<size_t>(r)])] = 1;
      cum += w[static_cast<size_t>(order[static_cast<size_t>(r)])] / z;
    }
    for (int64_t kb = 0; kb < std::min(sink, nb); ++kb) keep[static_cast<size_t>(qb * nb + kb)] = 1;
    keep[static_cast<size_t>(qb * nb + qb)] = 1;
  }
  return keep;
}

TEST(SpadePolicy, MaskMatchesScalarRuleOnRaggedGrids) {
  for (const TokenGrid g : {TokenGrid{3, 5, 7}, TokenGrid{5, 9, 6}}) {
    for (const int64_t topk : {0, 3}) {
      CallData d(g, 3, 8);
      d.randomize(11 + static_cast<uint32_t>(topk), 1.5f);
      d.call.layer = 2;
      SpadeOptions o;
      o.shapes = {{1, 2, 4}, {3, 1, 2}, {2, 2, 2}, {1, 4, 16}};
      o.topp = 0.7;
      o.topk = topk;
      o.sink = 2;
      SpadePolicy p(o);
      const auto plan = p.plan(d.call);
      ASSERT_TRUE(testing::plan_is_well_formed(plan, 3));
      int64_t skipped = 0;  // the case must be sparse somewhere to test anything
      for (const auto& grp : plan.groups)
        skipped +=
            grp.mask.heads() * grp.mask.q_blocks() * grp.mask.k_blocks() - grp.mask.active_tiles();
      EXPECT_GT(skipped, 0);
      for (const auto& grp : plan.groups) {
        for (size_t i = 0; i < grp.heads.size(); ++i) {
          const int64_t h = grp.heads[i];
          const auto& shape =
              o.shapes[static_cast<size_t>(p.last_shapes()[static_cast<size_t>(h)])];
          EXPECT_EQ(grp.layout.block_shape, shape);
          const auto ref = reference_mask(d, h, shape, 0.7, topk, 2);
          const int64_t nb = grp.layout.blocks.blocks();
          ASSERT_EQ(static_cast<int64_t>(ref.size()), nb * nb);
          for (int64_t qb = 0; qb < nb; ++qb)
            for (int64_t kb = 0; kb < nb; ++kb)
              ASSERT_EQ(grp.mask.get(static_cast<int64_t>(i), qb, kb) == TileClass::kFull,
                        ref[static_cast<size_t>(qb * nb + kb)] != 0)
                  << "grid " << g.frames << "x" << g.height << "x" << g.width << " shape "
                  << shape.str() << " head " << h << " tile " << qb << "," << kb;
        }
      }
    }
  }
}

// The bf16 copies (AttentionCall::q16 / k16, what the DiT passes in bf16 mode) give the plan of
// the f32 values they hold: q/k rounded to bf16 first, then planned once from f32 and once from
// bf16 (the shapes chosen and every mask bit must agree, the similarity scores to rounding), with
// shapes
// chosen and with shapes kept (the one-shape query pass), top-p and top-k, ragged grids.
TEST(SpadePolicy, Bf16CopiesPlanLikeTheirF32Values) {
  for (const TokenGrid g : {TokenGrid{3, 5, 7}, TokenGrid{4, 8, 9}}) {
    for (const int64_t topk : {0, 4}) {
      CallData d(g, 3, 24);  // head_dim 24: a vector of 16 plus a ragged tail
      d.randomize(5 + static_cast<uint32_t>(topk), 1.5f);
      std::vector<BFloat16> q16(d.q.size()), k16(d.k.size());
      convert_floats_reference(d.q.data(), DType::kF32, q16.data(), DType::kBF16, d.q.size());
      convert_floats_reference(d.k.data(), DType::kF32, k16.data(), DType::kBF16, d.k.size());
      convert_floats_reference(q16.data(), DType::kBF16, d.q.data(), DType::kF32, d.q.size());
      convert_floats_reference(k16.data(), DType::kBF16, d.k.data(), DType::kF32, d.k.size());
      d.call.layer = 2;
      AttentionCall c16 = d.call;
      c16.q16 = q16.data();
      c16.k16 = k16.data();
      SpadeOptions o;
      o.shapes = {{1, 2, 4}, {3, 1, 2}, {2, 2, 2}, {1, 4, 16}};
      o.topp = 0.7;
      o.topk = topk;
      o.shape_every = 2;  // step 0 chooses shapes, step 1 keeps them
      SpadePolicy p32(o), p16(o);
      for (int64_t step = 0; step < 2; ++step) {
        d.call.step = c16.step = step;
        const std::vector<float> q_saved = d.q, k_saved = d.k;
        const auto plan32 = p32.plan(d.call);
        // The f32 rows are NaN while the bf16 plan runs: it must read the copies alone.
        std::fill(d.q.begin(), d.q.end(), std::nanf(""));
        std::fill(d.k.begin(), d.k.end(), std::nanf(""));
        const auto plan16 = p16.plan(c16);
        d.q = q_saved;
        d.k = k_saved;
        EXPECT_EQ(p32.last_reshaped(), step == 0);
        EXPECT_EQ(p16.last_reshaped(), step == 0);
        EXPECT_EQ(p16.last_shapes(), p32.last_shapes());
        // Same values; the two clones may round the sums differently.
        for (size_t h = 0; step == 0 && h < 3; ++h)
          for (size_t i = 0; i < o.shapes.size(); ++i)
            EXPECT_NEAR(p16.last_similarity()[h][i], p32.last_similarity()[h][i], 1e-6);
        for (int64_t h = 0; h < 3; ++h)
          ASSERT_EQ(testing::expand_head(plan16, h, g.tokens()),
                    testing::expand_head(plan32, h, g.tokens()))
              << "grid " << g.frames << "x" << g.height << "x" << g.width << " topk " << topk
              << " step " << step << " head " << h;
      }
    }
  }
}

// The fast summaries (one pass over the queries for all shapes, runs of gcd(widths) tokens; one
// pass over the keys per chosen shape) against the per-layout functions on block3d_layout:
// ragged grids (runs cut at the row end, ragged blocks on every axis), gcd 4 and 1 along width.
TEST(SpadeSummaries, EqualThePerLayoutFunctions) {
  const std::vector<std::vector<BlockShape>> sets = {
      {{1, 4, 16}, {1, 8, 8}, {16, 1, 4}, {8, 1, 8}, {4, 2, 8}, {2, 4, 8}},
      {{1, 2, 4}, {3, 1, 2}, {2, 2, 3}, {1, 4, 16}}};
  for (const TokenGrid g : {TokenGrid{5, 9, 13}, TokenGrid{17, 3, 30}, TokenGrid{1, 1, 7}}) {
    for (const auto& shapes : sets) {
      CallData d(g, 2, 24);
      d.randomize(17, 1.3f);
      SpadeSummaries sums(g, shapes);
      for (int64_t h = 0; h < 2; ++h) {
        sums.query_sums(d.call, h, true);
        for (size_t s = 0; s < shapes.size(); ++s) {
          const auto layout = block3d_layout(g, shapes[s]);
          EXPECT_NEAR(sums.similarity(s), mean_block_query_similarity(d.call, h, layout), 1e-5)
              << shapes[s].str() << " head " << h;
          const auto fast = sums.estimate(d.call, h, s);
          const auto ref = spade_block_estimate(d.call, h, layout);
          ASSERT_EQ(fast.size(), ref.size()) << shapes[s].str();
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(fast[i], ref[i], 1e-5 * std::max(1.0, ref[i]))
                << shapes[s].str() << " head " << h << " entry " << i;
        }
        // Raw sums only (shapes reused): the estimate is unchanged.
        sums.query_sums(d.call, h, false);
        const auto layout = block3d_layout(g, shapes[1]);
        const auto fast = sums.estimate(d.call, h, 1);
        const auto ref = spade_block_estimate(d.call, h, layout);
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-5);
        // One shape's sums only, each shape in turn (the buffers keep other shapes' stale rows
        // and the previous estimate's sizes): the same estimates.
        for (size_t s = shapes.size(); s-- > 0;) {
          sums.query_sums(d.call, h, false, static_cast<int>(s));
          const auto one = sums.estimate(d.call, h, s);
          const auto want = spade_block_estimate(d.call, h, block3d_layout(g, shapes[s]));
          ASSERT_EQ(one.size(), want.size()) << shapes[s].str();
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(one[i], want[i], 1e-5 * std::max(1.0, want[i]))
                << "only " << shapes[s].str() << " head " << h << " entry " << i;
        }
      }
    }
  }
}

// Equal estimates (zero queries: every score 0, equal block sizes) are taken by block index,
// as the reference's stable descending sort does, for top-k and top-p alike.
TEST(SpadePolicy, TiesGoToTheLowerBlockIndex) {
  const TokenGrid g{2, 4, 8};
  for (const int64_t topk : {3, 0}) {
    CallData d(g, 1, 8);
    d.randomize(3);
    std::fill(d.q.begin(), d.q.end(), 0.0f);
    d.call.layer = 1;
    SpadeOptions o;
    o.shapes = {{1, 2, 4}};
    o.topk = topk;
    o.topp = 0.3;
    o.sink = 0;
    SpadePolicy p(o);
    const auto plan = p.plan(d.call);
    ASSERT_EQ(plan.groups.size(), 1u);
    const auto ref = reference_mask(d, 0, o.shapes[0], 0.3, topk, 0);
    const int64_t nb = plan.groups[0].layout.blocks.blocks();
    for (int64_t qb = 0; qb < nb; ++qb)
      for (int64_t kb = 0; kb < nb; ++kb)
        ASSERT_EQ(plan.groups[0].mask.get(0, qb, kb) == TileClass::kFull,
                  ref[static_cast<size_t>(qb * nb + kb)] != 0)
            << "topk " << topk << " tile " << qb << "," << kb;
    EXPECT_EQ(plan.groups[0].mask.get(0, 5, 0), TileClass::kFull);  // lowest indices first
    EXPECT_EQ(plan.groups[0].mask.get(0, 5, 7), TileClass::kSkip);
  }
}

TEST(SpadePolicy, SimilarityEqualsMeanPairwiseCosine) {
  const TokenGrid g{3, 5, 7};
  CallData d(g, 2, 8);
  d.randomize(5);
  const auto layout = block3d_layout(g, BlockShape{2, 2, 3});
  double total = 0;
  int64_t count = 0;
  for (const auto& box : boxes(g, BlockShape{2, 2, 3})) {
    if (box.size() < 2) continue;
    double s = 0;
    int64_t pairs = 0;
    for (size_t a = 0; a < box.size(); ++a)
      for (size_t b = 0; b < box.size(); ++b) {
        if (a == b) continue;
        const float* x = d.qrow(box[a], 1);
        const float* y = d.qrow(box[b], 1);
        double xy = 0, xx = 0, yy = 0;
        for (int c = 0; c < 8; ++c) {
          xy += x[c] * y[c];
          xx += x[c] * x[c];
          yy += y[c] * y[c];
        }
        s += xy / std::sqrt(xx * yy);
        ++pairs;
      }
    total += s / static_cast<double>(pairs);
    ++count;
  }
  EXPECT_NEAR(mean_block_query_similarity(d.call, 1, layout), total / static_cast<double>(count),
              1e-5);
}

// Head 0's queries are constant over (frame, row group of 4) and head 1's over (row, column
// group of 4) across all frames: the spatial (1,4,16) and temporal (16,1,4) blocks hold
// identical queries respectively, every other candidate mixes groups.
TEST(SpadePolicy, PicksTheShapeWithTheMostSimilarQueries) {
  const TokenGrid g{16, 8, 16};
  CallData d(g, 2, 32);
  d.randomize(2);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> codes(64 * 32);
  for (auto& v : codes) v = nd(rng);
  for (int64_t t = 0; t < g.tokens(); ++t) {
    const int64_t f = t / 128, y = (t / 16) % 8, x = t % 16;
    const int64_t id0 = f * 2 + y / 4, id1 = y * 4 + x / 4;
    std::copy_n(&codes[static_cast<size_t>((id0 % 64) * 32)], 32, d.qrow(t, 0));
    std::copy_n(&codes[static_cast<size_t>((id1 % 64) * 32)], 32, d.qrow(t, 1));
  }
  d.call.layer = 1;
  SpadePolicy p(parse_spade_options(""));
  const auto plan = p.plan(d.call);
  ASSERT_TRUE(testing::plan_is_well_formed(plan, 2));
  const auto& shapes = p.options().shapes;
  EXPECT_EQ(shapes[static_cast<size_t>(p.last_shapes()[0])], (BlockShape{1, 4, 16}));
  EXPECT_EQ(shapes[static_cast<size_t>(p.last_shapes()[1])], (BlockShape{16, 1, 4}));
  EXPECT_NEAR(p.last_similarity()[0][0], 1.0, 1e-5);
  EXPECT_NEAR(p.last_similarity()[1][2], 1.0, 1e-5);
  EXPECT_LT(p.last_similarity()[0][1], 0.9);
  EXPECT_EQ(plan.groups.size(), 2u);
}

TEST(SpadePolicy, FirstLayerDenseAndTheBranchAndStepPickP) {
  CallData d(TokenGrid{2, 4, 4}, 1, 8);
  d.randomize(1);
  SpadePolicy p(parse_spade_options("topp=0.8,topp_uncond=0.6,topp_early=0.95,early=0.3"));
  d.call.layer = 0;
  EXPECT_TRUE(p.plan(d.call).all_dense());
  d.call.layer = 1;
  EXPECT_FALSE(p.plan(d.call).all_dense());
  d.call.steps = 10;
  d.call.step = 2;
  EXPECT_EQ(p.topp_for(d.call), 0.95);
  d.call.step = 3;
  EXPECT_EQ(p.topp_for(d.call), 0.8);
  d.call.cfg_branch = 1;
  EXPECT_EQ(p.topp_for(d.call), 0.6);
  EXPECT_EQ(p.topk_for(d.call), 0);  // top-p throughout
}

// The top-k budget by branch and step, and that the plan keeps that many key blocks per row
// (sink off; the diagonal block comes on top when the estimate did not pick it).
TEST(SpadePolicy, TheBranchAndStepPickK) {
  SpadePolicy p(parse_spade_options("topk=3,topk_uncond=0,topp_uncond=0.5,topk_early=1,early=0.3"));
  AttentionCall call;
  call.steps = 10;
  call.step = 2;
  EXPECT_EQ(p.topk_for(call), 1);
  call.step = 3;
  EXPECT_EQ(p.topk_for(call), 3);
  call.cfg_branch = 1;
  EXPECT_EQ(p.topk_for(call), 0);
  EXPECT_EQ(p.topp_for(call), 0.5);

  CallData d(TokenGrid{4, 8, 16}, 1, 8);  // 512 tokens: at least 8 key blocks in any shape
  d.randomize(3);
  d.call.layer = 1;
  d.call.steps = 10;
  SpadePolicy q(parse_spade_options("topk=3,topk_uncond=5,topk_early=1,early=0.3,sink=0"));
  auto kept_per_row = [&](int64_t step, int64_t branch) {
    d.call.step = step;
    d.call.cfg_branch = branch;
    const AttentionPlan plan = q.plan(d.call);
    std::vector<size_t> counts;
    for (const auto& g : plan.groups)
      for (int64_t qb = 0; qb < g.layout.blocks.blocks(); ++qb)
        counts.push_back(g.mask.row(0, qb).key_blocks.size());
    return counts;
  };
  // The diagonal block is always kept on top of the k chosen ones, so rows hold k or k + 1.
  for (const auto& [step, branch, k] :
       {std::tuple{0, 0, size_t{1}}, std::tuple{5, 0, size_t{3}}, std::tuple{5, 1, size_t{5}}})
    for (const size_t n : kept_per_row(step, branch)) {
      EXPECT_GE(n, k) << "step " << step << " branch " << branch;
      EXPECT_LE(n, k + 1) << "step " << step << " branch " << branch;
    }
}

TEST(SpadePolicy, OptionErrorsNameTheKey) {
  auto message = [](const char* opts) {
    try {
      make_spade_policy(opts);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("topp=1.5").find("topp"), std::string::npos);
  EXPECT_NE(message("topk=-1").find("topk"), std::string::npos);
  EXPECT_NE(message("top=0.5").find("unknown option 'top'"), std::string::npos);
  EXPECT_EQ(message("topp=0.5,sink=2"), "no error");
}

}  // namespace
}  // namespace vidax::sparse

namespace vidax::sparse {
namespace {

TEST(SpadePolicy, CanonicalNameParsesBack) {
  for (const char* opts : {"", "topk=3,sink=2", "topp=0.8,topp_early=0.95,early=0.2",
                           "topk=3,topk_uncond=0,topp_uncond=0.7", "topk_uncond=4",
                           "topk=8,topk_early=2,early=0.1,topp_early=0.9"}) {
    const std::string name = make_spade_policy(opts)->name();
    ASSERT_EQ(name.rfind("spade:", 0), 0u);
    EXPECT_EQ(make_spade_policy(name.substr(6))->name(), name) << opts;
  }
}

}  // namespace
}  // namespace vidax::sparse

namespace vidax::sparse {
namespace {

TEST(SpadePolicy, ShapeEveryReusesTheShapesBetweenChoices) {
  const TokenGrid g{4, 4, 8};
  CallData d(g, 1, 8);
  SpadeOptions o;
  o.shapes = {{1, 2, 8}, {4, 1, 2}};
  o.shape_every = 2;
  SpadePolicy p(o);
  d.call.layer = 1;
  d.call.steps = 10;
  // Queries constant over (frame, row pair): shape (1,2,8) holds identical queries.
  auto fill = [&](bool temporal) {
    for (int64_t t = 0; t < g.tokens(); ++t) {
      const int64_t f = t / 32, y = (t / 8) % 4, x = t % 8;
      std::fill_n(d.qrow(t, 0), 8, 0.0f);
      d.qrow(t, 0)[temporal ? (y * 4 + x / 2) % 8 : (f * 2 + y / 2) % 8] = 1.0f;
      d.qrow(t, 0)[temporal ? 0 : 1] += temporal ? static_cast<float>(y) : static_cast<float>(f);
    }
  };
  fill(false);
  d.call.step = 0;
  p.plan(d.call);
  EXPECT_TRUE(p.last_reshaped());
  EXPECT_EQ(p.last_shapes()[0], 0);
  fill(true);
  d.call.step = 1;
  p.plan(d.call);
  EXPECT_FALSE(p.last_reshaped());
  EXPECT_EQ(p.last_shapes()[0], 0);
  d.call.step = 2;
  p.plan(d.call);
  EXPECT_TRUE(p.last_reshaped());
  EXPECT_EQ(p.last_shapes()[0], 1);
}

}  // namespace
}  // namespace vidax::sparse
