#include "sparse/west_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>

#include "core/error.h"
#include "sparse/policies.h"
#include "sparse/policy_test_util.h"
#include "support/test_support.h"

namespace vidax::sparse {
namespace {

using testing::CallData;

WestPrior random_prior(int64_t layers, int64_t heads, std::array<int64_t, 3> grid, uint32_t seed,
                       float sharpness = 3.0f) {
  WestPrior p;
  p.layers = layers;
  p.heads = heads;
  p.grid = grid;
  p.calibration = R"({"prompts":"synth seeds 8000000+"})";
  const int64_t c = p.cells();
  p.mass.resize(static_cast<size_t>(layers * heads * c * c));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sharpness);
  for (int64_t r = 0; r < layers * heads * c; ++r) {
    double s = 0;
    for (int64_t j = 0; j < c; ++j) {
      const float v = std::exp(nd(rng));
      p.mass[static_cast<size_t>(r * c + j)] = v;
      s += v;
    }
    for (int64_t j = 0; j < c; ++j)
      p.mass[static_cast<size_t>(r * c + j)] =
          static_cast<float>(p.mass[static_cast<size_t>(r * c + j)] / s);
  }
  return p;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string load_error(const std::string& path) {
  try {
    read_west_prior(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(WestPrior, FileRoundTrip) {
  vidax::testing::TempDir dir;
  const auto p = random_prior(2, 3, {2, 3, 2}, 1);
  write_west_prior(dir.file("a.west"), p);
  const auto q = read_west_prior(dir.file("a.west"));
  EXPECT_EQ(q.layers, 2);
  EXPECT_EQ(q.heads, 3);
  EXPECT_EQ(q.grid, p.grid);
  EXPECT_EQ(q.mass, p.mass);
  EXPECT_EQ(q.calibration, p.calibration);
}

TEST(WestPrior, CorruptedFilesAreRefusedWithTheReason) {
  vidax::testing::TempDir dir;
  const std::string good_path = dir.file("good.west");
  write_west_prior(good_path, random_prior(1, 2, {2, 2, 1}, 2));
  const std::string good = read_all(good_path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<uint8_t>(good[8 + static_cast<size_t>(i)])) << (8 * i);
  const std::string header = good.substr(16, n);
  const std::string payload = good.substr(16 + n);
  auto with_header = [&](std::string h) {
    std::string out = good.substr(0, 8);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
    return out + h + payload;
  };
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  float nan = std::nanf("");
  std::string nan_payload = payload;
  std::memcpy(nan_payload.data() + 4, &nan, 4);
  std::string off_payload = payload;
  float first = 0;  // moved by 0.5 so its row no longer sums to 1
  std::memcpy(&first, payload.data(), 4);
  first = first < 0.5f ? first + 0.5f : first - 0.5f;
  std::memcpy(off_payload.data(), &first, 4);
  const struct {
    std::string bytes, needle;
  } cases[] = {
      {good.substr(0, good.size() - 4), "payload has"},
      {good + "xx", "payload has"},
      {"NOTWEST!" + good.substr(8), "not a .west file"},
      {good.substr(0, 10), "not a .west file"},
      {good.substr(0, 8) + std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8) + good.substr(16),
       "runs past the file"},
      {with_header("{\"format\": "), "not valid JSON"},
      {with_header(replace(header, "\"layers\":1", "\"layerz\":1")), "integer \"layers\""},
      {with_header(replace(header, "\"version\":1", "\"version\":2")), "not supported"},
      {with_header(replace(header, "vidax-west", "vidax-wes")), "\"format\""},
      {with_header(replace(header, "\"grid\":[2,2,1]", "\"grid\":[2,2]")), "\"grid\""},
      {with_header(replace(header, "\"heads\":2", "\"heads\":3")), "payload has"},
      {good.substr(0, 16 + n) + nan_payload, "mass must be in [0, 1]"},
      {good.substr(0, 16 + n) + off_payload, "sums to"},
  };
  for (const auto& c : cases) {
    const std::string path = dir.file("bad.west");
    write_all(path, c.bytes);
    const std::string msg = load_error(path);
    EXPECT_NE(msg.find(c.needle), std::string::npos)
        << "expected '" << c.needle << "', got: " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  EXPECT_NE(load_error(dir.file("missing.west")).find("cannot open"), std::string::npos);
}

// The recorder's prior equals a direct computation: every query row's softmax summed per
// (query cell, key cell), each row normalized.
TEST(WestPrior, RecorderAccumulatesBlockMassOfDenseCalls) {
  const TokenGrid g{3, 5, 7};
  const std::array<int64_t, 3> cells{2, 2, 3};
  CallData d(g, 2, 8);
  d.call.layers = 2;
  WestRecorder rec(cells, 0, 0);
  std::vector<double> expect(static_cast<size_t>(2 * 2 * 12 * 12), 0.0);
  auto cell_of = [&](int64_t t) {
    const int64_t f = t / 35, y = (t / 7) % 5, x = t % 7;
    return ((2 * f + 1) * 2 / 6 * 2 + (2 * y + 1) * 2 / 10) * 3 + (2 * x + 1) * 3 / 14;
  };
  for (int call = 0; call < 3; ++call) {
    d.randomize(100 + static_cast<uint32_t>(call));
    d.call.layer = call % 2;
    const auto plan = rec.plan(d.call);
    EXPECT_TRUE(plan.all_dense());
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < g.tokens(); ++i) {
        std::vector<double> s(static_cast<size_t>(g.tokens()));
        double mx = -1e30, z = 0;
        for (int64_t j = 0; j < g.tokens(); ++j) {
          double v = 0;
          for (int c = 0; c < 8; ++c) v += d.qrow(i, h)[c] * d.krow(j, h)[c];
          s[static_cast<size_t>(j)] = v / std::sqrt(8.0);
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        for (auto& v : s) z += (v = std::exp(v - mx));
        for (int64_t j = 0; j < g.tokens(); ++j)
          expect[static_cast<size_t>(((d.call.layer * 2 + h) * 12 + cell_of(i)) * 12 +
                                     cell_of(j))] += s[static_cast<size_t>(j)] / z;
      }
  }
  const auto p = rec.accumulator().prior();
  ASSERT_EQ(p.mass.size(), expect.size());
  for (size_t r = 0; r < expect.size() / 12; ++r) {
    const double sum = std::accumulate(&expect[r * 12], &expect[r * 12] + 12, 0.0);
    for (size_t j = 0; j < 12; ++j) EXPECT_NEAR(p.mass[r * 12 + j], expect[r * 12 + j] / sum, 1e-5);
  }
}

// The run-time mask: a tile is kept iff FAST kept its cell pair (cells by block centre), on
// grids of any resolution, ragged blocks included.
TEST(WestPolicy, PriorResamplesToAnyGrid) {
  const std::array<int64_t, 3> cells{2, 3, 3};
  WestOptions o;
  o.path = "mem";
  o.budget = 0.2;
  o.block = {1, 2, 2};
  WestPolicy pol(o, random_prior(1, 2, cells, 5));
  for (const TokenGrid g : {TokenGrid{6, 10, 14}, TokenGrid{3, 5, 7}, TokenGrid{1, 3, 9}}) {
    CallData d(g, 2, 4);
    d.randomize(1);
    const auto plan = pol.plan(d.call);
    ASSERT_TRUE(testing::plan_is_well_formed(plan, 2));
    const auto& grp = plan.groups[0];
    // Block boxes by raster order over the block grid; cell of the box centre, directly.
    const int64_t bt = g.frames, bh = (g.height + 1) / 2, bw = (g.width + 1) / 2;
    ASSERT_EQ(grp.layout.blocks.blocks(), bt * bh * bw);
    auto cell = [&](int64_t b) {
      const int64_t f = b / (bh * bw), y0 = 2 * ((b / bw) % bh), x0 = 2 * (b % bw);
      const int64_t y1 = std::min(g.height, y0 + 2), x1 = std::min(g.width, x0 + 2);
      const int64_t cf = std::min<int64_t>(1, (2 * f + 1) * 2 / (2 * g.frames));
      const int64_t cy = std::min<int64_t>(2, (y0 + y1) * 3 / (2 * g.height));
      const int64_t cx = std::min<int64_t>(2, (x0 + x1) * 3 / (2 * g.width));
      return (cf * 3 + cy) * 3 + cx;
    };
    const int64_t nb = grp.layout.blocks.blocks();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t qb = 0; qb < nb; ++qb)
        for (int64_t kb = 0; kb < nb; ++kb) {
          const bool expect =
              qb == kb || pol.keep(0, h)[static_cast<size_t>(cell(qb) * 18 + cell(kb))];
          ASSERT_EQ(grp.mask.get(h, qb, kb) != TileClass::kSkip, expect)
              << g.frames << "x" << g.height << "x" << g.width << " head " << h << " " << qb << ","
              << kb;
        }
  }
  CallData wrong(TokenGrid{2, 2, 2}, 3, 4);
  EXPECT_THROW(pol.plan(wrong.call), InputError);
}

TEST(WestPolicy, FastFidelityBudgetHoldsPerRowAndIsTight) {
  const auto prior = random_prior(2, 3, {2, 2, 3}, 7);
  for (const double budget : {0.0, 0.05, 0.3}) {
    WestOptions o;
    o.budget = budget;
    WestPolicy pol(o, prior);
    const int64_t c = 12;
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t r = 0; r < c; ++r) {
          const float* row = prior.row(l, h, r);
          const auto& k = pol.keep(l, h);
          double dropped = 0, smallest_kept = 2;
          for (int64_t j = 0; j < c; ++j) {
            if (!k[static_cast<size_t>(r * c + j)])
              dropped += row[j];
            else if (j != r)
              smallest_kept = std::min<double>(smallest_kept, row[j]);
          }
          EXPECT_LE(dropped, budget + 1e-6);
          // Tight: dropping the smallest kept cell too would break the budget.
          if (smallest_kept <= 1) {
            EXPECT_GT(dropped + smallest_kept, budget - 1e-6);
          }
        }
  }
}

TEST(WestPolicy, FastGlobalDensityTargetFavoursConcentratedHeads) {
  auto prior = random_prior(1, 2, {2, 2, 4}, 9, 0.01f);  // head 1 near uniform
  const auto sharp = random_prior(1, 1, {2, 2, 4}, 9, 6.0f);
  std::copy(sharp.mass.begin(), sharp.mass.end(), prior.mass.begin());  // head 0 concentrated
  WestOptions o;
  o.density = 0.3;
  WestPolicy pol(o, prior);
  const double total = (pol.head_density(0, 0) + pol.head_density(0, 1)) / 2;
  EXPECT_NEAR(total, 0.3, 1.0 / (2 * 256));
  EXPECT_LT(pol.head_density(0, 0), pol.head_density(0, 1));
  EXPECT_LT(pol.head_dropped(0, 0), pol.head_dropped(0, 1));
}

TEST(WestPolicy, OptionsAndFactoryErrors) {
  auto o = parse_west_options("dir:x/prior.west:budget=0.1,block=1x4x8");
  EXPECT_EQ(o.path, "dir:x/prior.west");
  EXPECT_EQ(o.budget, 0.1);
  EXPECT_EQ(o.block, (BlockShape{1, 4, 8}));
  EXPECT_EQ(parse_west_options("p.west").path, "p.west");
  EXPECT_EQ(parse_west_options("p.west:density=0.2").density, 0.2);
  auto message = [](const char* opts) {
    try {
      make_west_policy(opts);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("").find("west:FILE"), std::string::npos);
  EXPECT_NE(message("p.west:budget=0.1,density=0.2").find("not both"), std::string::npos);
  EXPECT_NE(message("p.west:block=2x8").find("block"), std::string::npos);
  EXPECT_NE(message("p.west:budge=0.1").find("unknown option 'budge'"), std::string::npos);
  EXPECT_NE(message("/nonexistent/p.west").find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace vidax::sparse

namespace vidax::sparse {
namespace {

TEST(WestPolicy, CanonicalNameParsesBack) {
  vidax::testing::TempDir dir;
  write_west_prior(dir.file("p.west"), random_prior(1, 1, {1, 2, 2}, 3));
  for (const std::string& opts : {std::string(""), std::string(":density=0.25,block=1x4x4")}) {
    const std::string name = make_west_policy(dir.file("p.west") + opts)->name();
    ASSERT_EQ(name.rfind("west:", 0), 0u);
    EXPECT_EQ(make_west_policy(name.substr(5))->name(), name);
  }
}

}  // namespace
}  // namespace vidax::sparse
