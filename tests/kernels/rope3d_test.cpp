// 3D RoPE: table layout, vector kernel vs scalar reference on every SIMD target, analytic
// properties, and a golden check of q/k after RoPE in the tiny Wan 2.1 DiT fixture.

#include "kernels/cpu/rope3d.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "hwy/targets.h"
#include "kernels/cpu/elementwise.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::for_each_target;

std::vector<float> normal_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  const int64_t oa = ia < 0 ? -static_cast<int64_t>(ia & 0x7fffffff) : ia;
  const int64_t ob = ib < 0 ? -static_cast<int64_t>(ib & 0x7fffffff) : ib;
  return std::llabs(oa - ob);
}

TEST(Rope3d, TableSplitAndValues) {
  const Rope3dTable t = Rope3dTable::build(128);
  EXPECT_EQ(t.head_dim, 128);
  EXPECT_EQ(t.max_positions, 1024);
  EXPECT_EQ(t.axis_pairs, (std::array<int64_t, 3>{22, 21, 21}));  // 44/42/42 channels
  EXPECT_EQ(t.cos.size(), 1024u * 64u);
  for (int64_t j = 0; j < 64; ++j) {
    EXPECT_EQ(t.cos_row(0)[j], 1.0);
    EXPECT_EQ(t.sin_row(0)[j], 0.0);
  }
  // Pair 0 of every axis turns by exactly p radians; pair 1 of the frame axis by p / 10000^(2/44);
  // pair 1 of the height axis (j = 23) by p / 10000^(2/42).
  EXPECT_EQ(t.cos_row(7)[0], std::cos(7.0));
  EXPECT_EQ(t.sin_row(7)[22], std::sin(7.0));
  EXPECT_EQ(t.sin_row(7)[43], std::sin(7.0));
  EXPECT_DOUBLE_EQ(t.sin_row(5)[1], std::sin(5.0 / std::pow(10000.0, 2.0 / 44)));
  EXPECT_DOUBLE_EQ(t.cos_row(1023)[23], std::cos(1023.0 / std::pow(10000.0, 2.0 / 42)));
  EXPECT_DOUBLE_EQ(t.sin_row(3)[63], std::sin(3.0 / std::pow(10000.0, 40.0 / 42)));

  EXPECT_EQ(Rope3dTable::build(64).axis_pairs, (std::array<int64_t, 3>{12, 10, 10}));
  EXPECT_EQ(Rope3dTable::build(12).axis_pairs, (std::array<int64_t, 3>{2, 2, 2}));
  EXPECT_EQ(Rope3dTable::build(2).axis_pairs, (std::array<int64_t, 3>{1, 0, 0}));
  EXPECT_EQ(Rope3dTable::build(16, 40).cos.size(), 40u * 8u);
  EXPECT_THROW(Rope3dTable::build(127), InputError);
  EXPECT_THROW(Rope3dTable::build(0), InputError);
}

struct Case {
  int64_t head_dim, heads, pad, grid_f, grid_h, grid_w, extra_tokens;
};

TEST(Rope3d, MatchesReferenceOnEveryTarget) {
  const Case cases[] = {
      {128, 2, 0, 3, 2, 3, 0},  {128, 12, 0, 2, 5, 7, 3}, {64, 3, 16, 4, 1, 6, 0},
      {18, 2, 2, 5, 3, 2, 4},   {12, 1, 0, 9, 2, 1, 0},   {6, 5, 1, 2, 2, 2, 1},
      {2, 2, 0, 3, 1, 1, 2},    {130, 1, 6, 1, 4, 4, 0},  {128, 2, 0, 1, 1, 1, 0},
      {128, 2, 0, 21, 3, 5, 0},  // frame indices up to 20
  };
  for (const Case& k : cases) {
    SCOPED_TRACE("head_dim=" + std::to_string(k.head_dim) + " heads=" + std::to_string(k.heads) +
                 " grid=" + std::to_string(k.grid_f) + "x" + std::to_string(k.grid_h) + "x" +
                 std::to_string(k.grid_w));
    const Rope3dTable table = Rope3dTable::build(k.head_dim);
    const int64_t tokens = k.grid_f * k.grid_h * k.grid_w + k.extra_tokens;
    const int64_t stride = k.heads * k.head_dim + k.pad;
    const std::vector<float> x = normal_floats(static_cast<size_t>(tokens * stride), 5);
    std::vector<float> want = x;
    rope3d_apply_reference(want.data(), tokens, k.heads, k.head_dim, stride, k.grid_f, k.grid_h,
                           k.grid_w, table);
    for_each_target([&] {
      std::vector<float> got = x;
      rope3d_apply(got.data(), tokens, k.heads, k.head_dim, stride, k.grid_f, k.grid_h, k.grid_w,
                   table);
      for (size_t i = 0; i < got.size(); ++i) {
        // Same double arithmetic; a fused multiply-add may move a result by one f32 step.
        ASSERT_LE(ulps(got[i], want[i]), 1) << "element " << i;
      }
      // Padding between rows and tokens beyond the grid are untouched.
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t c = k.heads * k.head_dim; c < stride; ++c) {
          ASSERT_EQ(got[static_cast<size_t>(t * stride + c)],
                    x[static_cast<size_t>(t * stride + c)]);
        }
      }
      for (int64_t t = tokens - k.extra_tokens; t < tokens; ++t) {
        for (int64_t c = 0; c < stride; ++c) {
          ASSERT_EQ(got[static_cast<size_t>(t * stride + c)],
                    x[static_cast<size_t>(t * stride + c)]);
        }
      }
    });
  }
}

TEST(Rope3d, PositionZeroIsIdentityAndPairNormsArePreserved) {
  const int64_t d = 128, heads = 4, gf = 3, gh = 4, gw = 5, tokens = gf * gh * gw;
  const Rope3dTable table = Rope3dTable::build(d);
  const std::vector<float> x = normal_floats(static_cast<size_t>(tokens * heads * d), 9);
  std::vector<float> y = x;
  rope3d_apply(y.data(), tokens, heads, d, heads * d, gf, gh, gw, table);
  for (int64_t i = 0; i < heads * d; ++i)
    EXPECT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)]);
  for (size_t p = 0; p < x.size(); p += 2) {
    const double before = std::hypot(x[p], x[p + 1]);
    const double after = std::hypot(y[p], y[p + 1]);
    ASSERT_NEAR(after, before, 2e-7 * before + 1e-30) << p;
  }
  // Token (f, 0, 0) only rotates the frame channels; (0, h, 0) only the height channels.
  const int64_t t_f = 2 * gh * gw, t_h = 3 * gw;
  for (int64_t c = 44; c < d; ++c) {
    EXPECT_EQ(y[static_cast<size_t>(t_f * heads * d + c)],
              x[static_cast<size_t>(t_f * heads * d + c)]);
  }
  for (int64_t c = 0; c < d; ++c) {
    if (c >= 44 && c < 86) continue;
    EXPECT_EQ(y[static_cast<size_t>(t_h * heads * d + c)],
              x[static_cast<size_t>(t_h * heads * d + c)]);
  }
  // Frame pair 0 at f = 2 turns by exactly 2 radians.
  const double re = x[static_cast<size_t>(t_f * heads * d)],
               im = x[static_cast<size_t>(t_f * heads * d + 1)];
  EXPECT_FLOAT_EQ(y[static_cast<size_t>(t_f * heads * d)],
                  static_cast<float>(re * std::cos(2.0) - im * std::sin(2.0)));
}

TEST(Rope3d, ParallelSplitMatchesSerial) {
  const int64_t d = 128, heads = 12, gf = 4, gh = 8, gw = 8, tokens = gf * gh * gw;
  const Rope3dTable table = Rope3dTable::build(d);
  const std::vector<float> x = normal_floats(static_cast<size_t>(tokens * heads * d), 3);
  std::vector<float> a = x, b = x;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  rope3d_apply(a.data(), tokens, heads, d, heads * d, gf, gh, gw, table);
  omp_set_num_threads(3);
  rope3d_apply(b.data(), tokens, heads, d, heads * d, gf, gh, gw, table);
  omp_set_num_threads(saved);
  EXPECT_EQ(a, b);
}

// The bf16 copy written by the same pass equals rotating, then rounding the rows: strided rows
// (a fused q|k|v layout), a ragged head size, tokens past the grid (copied unrotated), serial and
// parallel splits.
TEST(Rope3d, Bf16CopyEqualsRotateThenRound) {
  const int64_t d = 40, heads = 3, gf = 3, gh = 5, gw = 7, grid = gf * gh * gw, tokens = grid + 4;
  const int64_t stride = 3 * heads * d + 5, stride16 = heads * d + 3;
  const Rope3dTable table = Rope3dTable::build(d);
  const std::vector<float> x = normal_floats(static_cast<size_t>(tokens * stride), 11);
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> a = x, b = x;
    std::vector<BFloat16> copy(static_cast<size_t>(tokens * stride16));
    rope3d_apply(a.data(), tokens, heads, d, stride, gf, gh, gw, table);
    rope3d_apply(b.data(), tokens, heads, d, stride, gf, gh, gw, table, copy.data(), stride16);
    EXPECT_EQ(a, b) << "the f32 rows are unchanged by the copy";
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t e = 0; e < heads * d; ++e)
        ASSERT_EQ(copy[static_cast<size_t>(t * stride16 + e)].bits,
                  f32_to_bf16(a[static_cast<size_t>(t * stride + e)]))
            << "token " << t << " element " << e << " threads " << threads;
  }
  omp_set_num_threads(saved);
}

TEST(Rope3d, RejectsGridsBeyondTheTable) {
  const Rope3dTable table = Rope3dTable::build(12, 16);
  std::vector<float> x(17 * 12);
  EXPECT_NO_THROW(rope3d_apply(x.data(), 16, 1, 12, 12, 1, 1, 16, table));
  EXPECT_THROW(rope3d_apply(x.data(), 17, 1, 12, 12, 1, 1, 17, table), InputError);
  EXPECT_THROW(rope3d_apply(x.data(), 17, 1, 12, 12, 17, 1, 1, table), InputError);
  EXPECT_THROW(rope3d_apply_reference(x.data(), 17, 1, 12, 12, 1, 17, 1, table), InputError);
  // Fewer tokens than grid cells: only the tokens present are rotated.
  std::vector<float> y = normal_floats(3 * 12, 1), z = y;
  rope3d_apply(y.data(), 3, 1, 12, 12, 2, 2, 2, table);
  rope3d_apply_reference(z.data(), 3, 1, 12, 12, 2, 2, 2, table);
  EXPECT_EQ(y, z);
}

// --- Golden check against the tiny Wan 2.1 DiT fixture --------------------------------------

// Minimal reader for the F32 tensors of a safetensors file (the io layer is not a dependency
// of the kernel tests).
class F32Tensors {
 public:
  explicit F32Tensors(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    std::memcpy(&n, bytes_.data(), 8);
    header_ =
        nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + static_cast<int64_t>(n));
    data_start_ = 8 + n;
  }
  std::vector<float> get(const std::string& name) const {
    const auto& e = header_.at(name);
    EXPECT_EQ(e.at("dtype"), "F32") << name;
    const uint64_t b = e.at("data_offsets")[0], end = e.at("data_offsets")[1];
    std::vector<float> v((end - b) / 4);
    std::memcpy(v.data(), bytes_.data() + data_start_ + b, end - b);
    return v;
  }

 private:
  std::vector<char> bytes_;
  nlohmann::json header_;
  uint64_t data_start_ = 0;
};

// Block 0's q (or k) after norm1+modulation, the projection, RMSNorm and RoPE, rebuilt with the
// kernels from the fixture's patch tokens and weights; compared with the recorded rope_apply
// output. Config: dim 256, 2 heads of 128, eps 1e-6, grid 3x2x3 (latent 3x4x6, patch 1x2x2).
void check_block0_rope(const char* which) {
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  VIDAX_REQUIRE_FIXTURE(w_path, "dit_t2v_tiny.weights.safetensors");
  const F32Tensors io(io_path), w(w_path);
  const int64_t tokens = 18, dim = 256, heads = 2, hd = 128;
  const std::vector<float> x = io.get("call0.patch_tokens");    // [1, 18, 256]
  const std::vector<float> e0 = io.get("call0.e0");             // [1, 6, 256]
  const std::vector<float> mod = w.get("blocks.0.modulation");  // [1, 6, 256]
  std::vector<float> shift(dim), scale(dim);
  for (int64_t i = 0; i < dim; ++i) {
    shift[static_cast<size_t>(i)] = mod[static_cast<size_t>(i)] + e0[static_cast<size_t>(i)];
    scale[static_cast<size_t>(i)] =
        mod[static_cast<size_t>(dim + i)] + e0[static_cast<size_t>(dim + i)];
  }
  std::vector<float> y(static_cast<size_t>(tokens * dim));
  layer_norm_modulate_rows(x.data(), y.data(), tokens, dim, shift.data(), scale.data(), 0, 1e-6f);
  const std::string p = std::string("blocks.0.self_attn.") + which;
  const std::vector<float> wq = w.get(p + ".weight");  // [out, in]
  const std::vector<float> bq = w.get(p + ".bias");
  std::vector<float> q(static_cast<size_t>(tokens * dim));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t o = 0; o < dim; ++o) {
      double acc = bq[static_cast<size_t>(o)];
      for (int64_t i = 0; i < dim; ++i) {
        acc += static_cast<double>(y[static_cast<size_t>(t * dim + i)]) *
               wq[static_cast<size_t>(o * dim + i)];
      }
      q[static_cast<size_t>(t * dim + o)] = static_cast<float>(acc);
    }
  }
  const std::vector<float> norm_w =
      w.get(std::string("blocks.0.self_attn.norm_") + which + ".weight");
  rms_norm_rows(q.data(), q.data(), tokens, dim, norm_w.data(), 1e-6f);
  rope3d_apply(q.data(), tokens, heads, hd, dim, 3, 2, 3, Rope3dTable::build(hd));
  const std::vector<float> want = io.get(std::string("call0.block0.") + which + "_rope");
  ASSERT_EQ(want.size(), q.size());
  double worst = 0;
  for (size_t i = 0; i < q.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(q[i]) - want[i]));
  EXPECT_LT(worst, 2e-5) << which;
}

TEST(Rope3d, GoldenTinyDitQueryAfterRope) { check_block0_rope("q"); }
TEST(Rope3d, GoldenTinyDitKeyAfterRope) { check_block0_rope("k"); }

}  // namespace
}  // namespace vidax
