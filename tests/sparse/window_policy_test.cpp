// The window policy's mask and predicate against a direct element-level construction of the same
// rule from token coordinates, on small ragged grids; spec parsing and schedules.
#include "sparse/window_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "sparse/attention_policy.h"

namespace vidax::sparse {
namespace {

// Whether key tile k is in the w-tile window of query tile c on an axis of n tiles: the window
// is the w consecutive tiles whose centre is nearest to c (it never leaves the grid).
bool axis_keeps(int64_t c, int64_t k, int64_t n, int64_t w) {
  if (w >= n) return true;
  int64_t start = c - (w - 1) / 2;
  if (start < 0) start = 0;
  if (start + w > n) start = n - w;
  return k >= start && k < start + w;
}

bool direct_rule(const TokenGrid& g, const WindowSpec& s, int64_t qn, int64_t kn) {
  const int64_t hw = g.height * g.width;
  const int64_t qf = qn / hw, qy = qn % hw / g.width, qx = qn % g.width;
  const int64_t kf = kn / hw, ky = kn % hw / g.width, kx = kn % g.width;
  if (s.sink && kf == 0) return true;
  auto tiles = [](int64_t len, int64_t b) { return (len + b - 1) / b; };
  return axis_keeps(qf / s.tile.t, kf / s.tile.t, tiles(g.frames, s.tile.t),
                    s.window.t / s.tile.t) &&
         axis_keeps(qy / s.tile.h, ky / s.tile.h, tiles(g.height, s.tile.h),
                    s.window.h / s.tile.h) &&
         axis_keeps(qx / s.tile.w, kx / s.tile.w, tiles(g.width, s.tile.w), s.window.w / s.tile.w);
}

TEST(WindowPolicy, MaskMatchesDirectConstruction) {
  struct Case {
    TokenGrid grid;
    std::string spec;
  };
  const Case cases[] = {
      {{5, 7, 9}, "window:2,4,4:tile=1,2,2"},       {{5, 7, 9}, "window:4,4,8:tile=2,2,4:sink"},
      {{3, 4, 4}, "window:3,4,4:tile=3,4,4"},       {{6, 5, 11}, "window:1,6,6:tile=1,2,3:sink"},
      {{7, 9, 10}, "window:6,6,6:tile=2,3,3:sink"}, {{1, 5, 6}, "window:1,2,2:tile=1,1,1"},
      {{4, 3, 5}, "window:2,2,2:tile=1,1,1:sink"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    const WindowSpec spec = parse_window_spec(std::string_view(c.spec).substr(7));
    EXPECT_EQ(spec.str(), c.spec);
    const HeadGroup g = window_group(c.grid, 2, spec);
    const BlockPartition& p = g.layout.blocks;
    int64_t boundary = 0;
    for (int64_t head = 0; head < 2; ++head)
      for (int64_t qb = 0; qb < p.blocks(); ++qb)
        for (int64_t kb = 0; kb < p.blocks(); ++kb) {
          const TileClass tc = g.mask.get(head, qb, kb);
          std::vector<uint8_t> keep(static_cast<size_t>(p.size(qb) * p.size(kb)), 1);
          if (tc == TileClass::kBoundary) {
            ++boundary;
            ASSERT_TRUE(g.predicate);
            g.predicate(head, p.begin(qb), p.size(qb), p.begin(kb), p.size(kb), keep.data());
          }
          for (int64_t i = 0; i < p.size(qb); ++i)
            for (int64_t j = 0; j < p.size(kb); ++j) {
              const bool want = direct_rule(c.grid, spec, g.layout.original(p.begin(qb) + i),
                                            g.layout.original(p.begin(kb) + j));
              const bool got =
                  tc != TileClass::kSkip && keep[static_cast<size_t>(i * p.size(kb) + j)];
              ASSERT_EQ(got, want) << "head " << head << " tiles " << qb << "," << kb << " element "
                                   << i << "," << j;
            }
        }
    // Boundary tiles appear only for a sink with temporal tiles of more than one frame.
    EXPECT_EQ(boundary > 0, spec.sink && spec.tile.t > 1 && c.grid.frames > spec.window.t);
  }
}

AttentionCall call_at(int64_t layer, int64_t step) {
  AttentionCall c;
  c.layer = layer;
  c.step = step;
  c.layers = 30;
  c.steps = 50;
  c.grid = {4, 6, 8};
  c.heads = 2;
  c.head_dim = 16;
  return c;
}

TEST(AttentionSpec, PoliciesAndSchedules) {
  EXPECT_EQ(make_attention_policy("dense")->name(), "dense");
  EXPECT_EQ(make_attention_policy("window:18,24,24")->name(), "window:18,24,24:tile=6,8,8");
  auto p =
      make_attention_policy("dense@layers=0-1,steps=0-4;window:2,4,4:tile=1,2,2@steps=0-9+20-");
  EXPECT_EQ(p->name(), "dense@layers=0-1,steps=0-4;window:2,4,4:tile=1,2,2@steps=0-9+20-");
  EXPECT_TRUE(p->plan(call_at(0, 0)).all_dense());
  EXPECT_TRUE(p->plan(call_at(1, 4)).all_dense());
  EXPECT_FALSE(p->plan(call_at(2, 0)).all_dense());   // layer outside 0-1
  EXPECT_FALSE(p->plan(call_at(1, 5)).all_dense());   // step outside 0-4
  EXPECT_TRUE(p->plan(call_at(5, 12)).all_dense());   // no entry: dense
  EXPECT_FALSE(p->plan(call_at(5, 49)).all_dense());  // open range 20-
  const AttentionPlan w = p->plan(call_at(3, 3));
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0].heads, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(w.groups[0].layout.tokens(), 4 * 6 * 8);
}

TEST(AttentionSpec, ErrorsNameTheBadPart) {
  auto error_of = [](const std::string& spec) -> std::string {
    try {
      make_attention_policy(spec);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of("sliding").find("\"sliding\""), std::string::npos);
  EXPECT_NE(error_of("window").find("window:kt,kh,kw"), std::string::npos);
  EXPECT_NE(error_of("window:3,8").find("\"3,8\""), std::string::npos);
  EXPECT_NE(error_of("window:3,8,8").find("must divide"), std::string::npos);
  EXPECT_NE(error_of("window:6,8,8:bogus").find("\"bogus\""), std::string::npos);
  EXPECT_NE(error_of("dense@layer=1").find("\"layer=1\""), std::string::npos);
  EXPECT_NE(error_of("dense@layers=3-1").find("\"3-1\""), std::string::npos);
  EXPECT_NE(error_of("dense@steps=a").find("\"a\""), std::string::npos);
  EXPECT_NE(error_of("dense;;dense").find("empty entry"), std::string::npos);
  EXPECT_NE(error_of("dense:x").find("no options"), std::string::npos);
}

}  // namespace
}  // namespace vidax::sparse
