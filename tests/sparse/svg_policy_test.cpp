#include "sparse/svg_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "sparse/policies.h"
#include "sparse/policy_options.h"
#include "sparse/policy_test_util.h"

namespace vidax::sparse {
namespace {

using testing::CallData;

// The direct construction of the band rule the policy documents, counting pairs token by token:
// the most whole diagonals that fit the budget, then the next diagonal's tiles thinned evenly.
std::vector<uint8_t> reference_band(const BlockPartition& b, int64_t anchor, double density) {
  const int64_t nb = b.blocks(), n = b.tokens();
  std::vector<int64_t> block_of(static_cast<size_t>(n));
  for (int64_t x = 0; x < nb; ++x)
    for (int64_t t = b.begin(x); t < b.begin(x) + b.size(x); ++t)
      block_of[static_cast<size_t>(t)] = x;
  auto is_anchor = [&](int64_t kb) { return b.begin(kb) < anchor; };
  auto in_band = [&](int64_t qb, int64_t kb, int64_t diagonals) {
    return is_anchor(kb) || std::abs(qb - kb) < diagonals;
  };
  auto pairs_with = [&](int64_t diagonals) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        c += in_band(block_of[static_cast<size_t>(i)], block_of[static_cast<size_t>(j)], diagonals);
    return c;
  };
  const int64_t budget = std::llround(density * static_cast<double>(n * n));
  int64_t d = 1;
  while (d < nb && pairs_with(d + 1) <= budget) ++d;
  std::vector<uint8_t> tile(static_cast<size_t>(nb * nb), 0);
  for (int64_t qb = 0; qb < nb; ++qb)
    for (int64_t kb = 0; kb < nb; ++kb)
      tile[static_cast<size_t>(qb * nb + kb)] = in_band(qb, kb, d);
  if (d < nb) {
    std::vector<std::pair<int64_t, int64_t>> edge;
    int64_t add = 0;
    for (int64_t i = 0; i + d < nb; ++i)
      for (const auto& t : {std::pair{i, i + d}, std::pair{i + d, i}})
        if (!is_anchor(t.second)) {
          edge.push_back(t);
          add += b.size(t.first) * b.size(t.second);
        }
    const int64_t left = budget - pairs_with(d);
    if (!edge.empty() && left > 0) {
      const auto c = std::min<int64_t>(
          static_cast<int64_t>(edge.size()),
          std::llround(static_cast<double>(left) * static_cast<double>(edge.size()) /
                       static_cast<double>(add)));
      for (int64_t i = 0; i < c; ++i) {
        const auto& t =
            edge[static_cast<size_t>((2 * i + 1) * static_cast<int64_t>(edge.size()) / (2 * c))];
        tile[static_cast<size_t>(t.first * nb + t.second)] = 1;
      }
    }
  }
  return tile;
}

TEST(SvgPolicy, TemporalLayoutPutsFrameZeroFirstThenEachSitesFrames) {
  const TokenGrid g{3, 5, 7};
  const auto l = svg_temporal_layout(g, 8);
  ASSERT_EQ(static_cast<int64_t>(l.perm.size()), g.tokens());
  std::vector<int> seen(static_cast<size_t>(g.tokens()), 0);
  for (int64_t p = 0; p < g.tokens(); ++p) ++seen[static_cast<size_t>(l.original(p))];
  for (const int s : seen) EXPECT_EQ(s, 1);
  for (int64_t n = 0; n < g.tokens(); ++n) {
    const int64_t f = n / 35, s = n % 35;
    const int64_t p = f == 0 ? s : 35 + s * 2 + (f - 1);
    EXPECT_EQ(l.original(p), n);
  }
}

TEST(SvgPolicy, BandMaskMatchesScalarRuleOnRaggedPartitions) {
  for (const int64_t n : {105, 96, 61}) {
    for (const int64_t block : {4, 7, 16}) {
      for (const double density : {0.05, 0.15, 0.3, 0.6, 1.0}) {
        const int64_t anchor = 35;
        const auto parts = BlockPartition::uniform(n, block);
        const auto band = svg_band_mask(parts, anchor, density);
        const auto ref = reference_band(parts, anchor, density);
        const int64_t nb = parts.blocks();
        int64_t kept = 0;
        for (int64_t qb = 0; qb < nb; ++qb)
          for (int64_t kb = 0; kb < nb; ++kb) {
            const TileClass c = band.mask.get(0, qb, kb);
            ASSERT_NE(c, TileClass::kBoundary);
            ASSERT_EQ(c == TileClass::kFull, ref[static_cast<size_t>(qb * nb + kb)] != 0)
                << "n " << n << " block " << block << " density " << density << " tile " << qb
                << "," << kb;
            if (c == TileClass::kFull) kept += parts.size(qb) * parts.size(kb);
          }
        EXPECT_EQ(kept, band.kept_pairs);
        // Balanced rounding lands within one tile of the exact budget unless the anchor and the
        // diagonal alone exceed it.
        int64_t floor_pairs = 0;
        for (int64_t qb = 0; qb < nb; ++qb)
          for (int64_t kb = 0; kb < nb; ++kb)
            if (parts.begin(kb) < anchor || qb == kb)
              floor_pairs += parts.size(qb) * parts.size(kb);
        if (band.budget_pairs >= floor_pairs) {
          EXPECT_LE(std::abs(band.kept_pairs - band.budget_pairs), block * block)
              << "n " << n << " block " << block << " density " << density;
        }
      }
    }
  }
}

TEST(SvgPolicy, PlanExpandsToTheBandInEachHeadsOrder) {
  const TokenGrid g{3, 5, 7};
  CallData d(g, 4, 16);
  d.randomize(3);
  d.call.layers = 10;
  d.call.steps = 10;
  d.call.layer = 5;
  d.call.step = 5;
  SvgPolicy p(parse_svg_options("density=0.3,block=8,samples=16"));
  const auto plan = p.plan(d.call);
  ASSERT_TRUE(testing::plan_is_well_formed(plan, 4));
  const auto& m = p.masks_for(g);
  const int64_t n = g.tokens();
  for (int64_t h = 0; h < 4; ++h) {
    const int kind = p.last_kinds()[static_cast<size_t>(h)];
    const auto keep = testing::expand_head(plan, h, n);
    ASSERT_FALSE(keep.empty());
    for (int64_t a = 0; a < n; ++a)
      for (int64_t b = 0; b < n; ++b) {
        // Positions by the direct formulas, not the layout's tables.
        auto pos = [&](int64_t t) {
          if (kind == 0) return t;
          const int64_t f = t / 35, s = t % 35;
          return f == 0 ? s : 35 + s * 2 + (f - 1);
        };
        const bool expect = m.band[kind].mask.get(0, pos(a) / 8, pos(b) / 8) != TileClass::kSkip;
        ASSERT_EQ(keep[static_cast<size_t>(a * n + b)] != 0, expect) << h << " " << a << " " << b;
        if (b < 35) {
          ASSERT_TRUE(expect) << "frame 0 is every query's anchor";
        }
      }
  }
}

// Head 0 attends to its own spatial site in every frame (a temporal head), head 1 to its own
// frame (a spatial head); the routing must tell them apart by the mass each mask drops.
TEST(SvgPolicy, RoutingPicksTheMaskThatLosesLessMass) {
  const TokenGrid g{8, 4, 4};
  CallData d(g, 2, 16);
  for (int64_t t = 0; t < g.tokens(); ++t) {
    const int64_t f = t / 16, s = t % 16;
    d.qrow(t, 0)[s] = 8.0f;
    d.krow(t, 0)[s] = 8.0f;
    d.qrow(t, 1)[f] = 8.0f;
    d.krow(t, 1)[f] = 8.0f;
  }
  SvgPolicy p(parse_svg_options("density=0.3,block=8,warmup=0,warmup_layers=0"));
  const auto plan = p.plan(d.call);
  ASSERT_TRUE(testing::plan_is_well_formed(plan, 2));
  p.plan(d.call);  // the same step again: route_every=1 always routes
  EXPECT_TRUE(p.last_routed());
  EXPECT_EQ(p.last_kinds()[0], 1);
  EXPECT_EQ(p.last_kinds()[1], 0);
  EXPECT_LT(p.last_errors()[0][1], p.last_errors()[0][0]);
  EXPECT_LT(p.last_errors()[1][0], p.last_errors()[1][1]);
  ASSERT_EQ(plan.groups.size(), 2u);
  for (const auto& grp : plan.groups) {
    ASSERT_EQ(grp.heads.size(), 1u);
    EXPECT_EQ(grp.layout.identity(), grp.heads[0] == 1);
  }
}

// Ulysses readiness: after the all-to-all a rank holds all tokens of a subset of the heads, and
// its call carries only those (heads = local count, local head indices). Routing uses only each
// head's own q/k, so a call with heads 2 and 3 of a 4-head call routes them exactly as the full
// call does (same errors, bit for bit), and its plan groups local indices 0 and 1.
TEST(SvgPolicy, LocalHeadsRouteAsInTheFullCall) {
  const TokenGrid g{6, 5, 7};
  CallData full(g, 4, 32);
  full.randomize(8, 1.5f);
  for (int64_t t = 0; t < g.tokens(); ++t) {  // head 2: same site across frames; head 3: same frame
    full.qrow(t, 2)[t % 35] += 6.0f;
    full.krow(t, 2)[t % 35] += 6.0f;
    full.qrow(t, 3)[t / 35] += 6.0f;
    full.krow(t, 3)[t / 35] += 6.0f;
  }
  CallData local(g, 2, 32);
  for (int64_t t = 0; t < g.tokens(); ++t)
    for (int64_t h = 0; h < 2; ++h) {
      std::copy_n(full.qrow(t, h + 2), 32, local.qrow(t, h));
      std::copy_n(full.krow(t, h + 2), 32, local.krow(t, h));
    }
  const char* opts = "density=0.25,block=16,warmup=0,warmup_layers=0";
  SvgPolicy whole(parse_svg_options(opts)), part(parse_svg_options(opts));
  whole.plan(full.call);
  const auto plan = part.plan(local.call);
  ASSERT_TRUE(testing::plan_is_well_formed(plan, 2));
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_EQ(part.last_kinds()[static_cast<size_t>(h)],
              whole.last_kinds()[static_cast<size_t>(h + 2)]);
    EXPECT_EQ(part.last_errors()[static_cast<size_t>(h)],
              whole.last_errors()[static_cast<size_t>(h + 2)]);
  }
  EXPECT_EQ(part.last_kinds()[0], 1);  // the same-site head: temporal
  EXPECT_EQ(part.last_kinds()[1], 0);  // the same-frame head: spatial
}

// The routing errors against a scalar computation: per head and kind, the mean over the sampled
// rows of the dense attention mass (bf16-rounded q/k, as the routing computes it) outside the
// kind's band, with the band read tile by tile from its mask and the token's position in the
// kind's layout. Random q/k on a ragged grid with more than one 512-key chunk.
TEST(SvgPolicy, RoutingErrorsEqualTheScalarLostMass) {
  const TokenGrid g{5, 9, 13};
  CallData d(g, 3, 32);
  d.randomize(21, 1.5f);
  SvgPolicy p(parse_svg_options("density=0.2,block=16,samples=70,warmup=0,warmup_layers=0"));
  p.plan(d.call);
  const auto& m = p.masks_for(g);
  CallData r(g, 3, 32);
  for (size_t i = 0; i < d.q.size(); ++i) {
    r.q[i] = bf16_to_f32(f32_to_bf16(d.q[i]));
    r.k[i] = bf16_to_f32(f32_to_bf16(d.k[i]));
  }
  const auto rows = p.sample_rows(d.call);
  const int64_t n = g.tokens();
  std::vector<float> probs(static_cast<size_t>(n));
  for (int64_t h = 0; h < 3; ++h)
    for (int kind = 0; kind < 2; ++kind) {
      double lost = 0;
      for (const int64_t q : rows) {
        dense_attention_row(r.call, h, q, probs.data());
        const int64_t qb = m.position[kind][static_cast<size_t>(q)] / 16;
        for (int64_t j = 0; j < n; ++j)
          if (m.band[kind].mask.get(0, qb, m.position[kind][static_cast<size_t>(j)] / 16) ==
              TileClass::kSkip)
            lost += probs[static_cast<size_t>(j)];
      }
      lost /= static_cast<double>(rows.size());
      EXPECT_NEAR(p.last_errors()[static_cast<size_t>(h)][static_cast<size_t>(kind)], lost, 2e-5)
          << "head " << h << " kind " << kind;
      EXPECT_GT(lost, 0.05);  // the bands drop something, so the comparison means something
    }
}

TEST(SvgPolicy, DenseWarmUpForTheFirstStepsAndLayers) {
  CallData d(TokenGrid{2, 4, 4}, 2, 8);
  d.randomize(1);
  SvgPolicy p(parse_svg_options("warmup=0.2,warmup_layers=0.1"));
  d.call.steps = 10;
  d.call.layers = 30;
  for (const auto& [step, layer, dense] :
       {std::tuple{0, 10, true}, {1, 10, true}, {2, 10, false}, {5, 2, true}, {5, 3, false}}) {
    d.call.step = step;
    d.call.layer = layer;
    const auto plan = p.plan(d.call);
    EXPECT_EQ(plan.all_dense(), dense) << step << " " << layer;
  }
  // The repository's defaults leave Wan 1.3B's 30 layers all sparse (floor(0.025 * 30) = 0)
  // and the first floor(0.075 * 50) = 3 of 50 steps dense.
  SvgPolicy def(parse_svg_options(""));
  d.call.steps = 50;
  d.call.layer = 0;
  d.call.step = 2;
  EXPECT_TRUE(def.warm_up(d.call));
  d.call.step = 3;
  EXPECT_FALSE(def.warm_up(d.call));
}

TEST(SvgPolicy, OptionErrorsNameTheKey) {
  auto message = [](const char* opts) {
    try {
      make_svg_policy(opts);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("density=2").find("density"), std::string::npos);
  EXPECT_NE(message("density=abc").find("not a number"), std::string::npos);
  EXPECT_NE(message("densty=0.1").find("unknown option 'densty'"), std::string::npos);
  EXPECT_NE(message("density").find("key=value"), std::string::npos);
  EXPECT_NE(message("block=0").find("block"), std::string::npos);
  EXPECT_EQ(make_svg_policy("density=0.1,warmup=0.25")->name(),
            "svg:density=0.1,warmup=0.25,warmup_layers=0.025,samples=64,block=128");
}

}  // namespace
}  // namespace vidax::sparse

namespace vidax::sparse {
namespace {

// One frame: both orders coincide, so every head routes spatial (ties go spatial) and the
// anchor is the whole frame (dense).
TEST(SvgPolicy, SingleFrameGridIsAnchoredDense) {
  testing::CallData d(TokenGrid{1, 6, 5}, 2, 8);
  d.randomize(8);
  SvgPolicy p(parse_svg_options("block=4,warmup=0,warmup_layers=0"));
  const auto plan = p.plan(d.call);
  ASSERT_TRUE(testing::plan_is_well_formed(plan, 2));
  EXPECT_EQ(p.last_kinds(), (std::vector<int>{0, 0}));
  for (int64_t h = 0; h < 2; ++h) {
    const auto keep = testing::expand_head(plan, h, 30);
    for (const uint8_t v : keep) EXPECT_EQ(v, 1);
  }
}

TEST(SvgPolicy, CanonicalNameParsesBack) {
  const auto p = make_svg_policy("seed=3,block=64,density=0.2");
  const std::string name = p->name();
  ASSERT_EQ(name.rfind("svg:", 0), 0u);
  EXPECT_EQ(make_svg_policy(name.substr(4))->name(), name);
}

}  // namespace
}  // namespace vidax::sparse

namespace vidax::sparse {
namespace {

// route_every=3: the kinds of step 0 hold for steps 1 and 2 even when the heads change
// behaviour, step 3 routes again.
TEST(SvgPolicy, RouteEveryReusesTheKindsBetweenRoutings) {
  const TokenGrid g{8, 4, 4};
  testing::CallData d(g, 2, 16);
  auto make_heads = [&](bool swapped) {
    std::fill(d.q.begin(), d.q.end(), 0.0f);
    std::fill(d.k.begin(), d.k.end(), 0.0f);
    for (int64_t t = 0; t < g.tokens(); ++t) {
      const int64_t f = t / 16, s = t % 16;
      const int64_t temporal_head = swapped ? 1 : 0, spatial_head = 1 - temporal_head;
      d.qrow(t, temporal_head)[s] = d.krow(t, temporal_head)[s] = 8.0f;
      d.qrow(t, spatial_head)[f] = d.krow(t, spatial_head)[f] = 8.0f;
    }
  };
  SvgPolicy p(parse_svg_options("density=0.3,block=8,warmup=0,warmup_layers=0,route_every=3"));
  d.call.steps = 10;
  make_heads(false);
  d.call.step = 0;
  p.plan(d.call);
  EXPECT_TRUE(p.last_routed());
  EXPECT_EQ(p.last_kinds(), (std::vector<int>{1, 0}));
  make_heads(true);
  for (const int64_t step : {1, 2}) {
    d.call.step = step;
    const auto plan = p.plan(d.call);
    EXPECT_FALSE(p.last_routed());
    EXPECT_EQ(p.last_kinds(), (std::vector<int>{1, 0}));
    EXPECT_TRUE(testing::plan_is_well_formed(plan, 2));
  }
  d.call.cfg_branch = 1;  // the other branch has its own routing
  p.plan(d.call);
  EXPECT_TRUE(p.last_routed());
  EXPECT_EQ(p.last_kinds(), (std::vector<int>{0, 1}));
  d.call.cfg_branch = 0;
  d.call.step = 3;
  p.plan(d.call);
  EXPECT_TRUE(p.last_routed());
  EXPECT_EQ(p.last_kinds(), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace vidax::sparse
