// patchify / unpatchify against direct index formulas, and the sinusoidal timestep embedding
// against a direct evaluation of the reference formula.
#include <cmath>

#include "nn/patchify.h"
#include "nn/timestep_embedding.h"
#include "support/test_support.h"

namespace vidax {
namespace {

struct Case {
  int64_t c, f, h, w;
  std::array<int64_t, 3> p;
};

class PatchifyTest : public ::testing::TestWithParam<Case> {};

TEST_P(PatchifyTest, MatchesConv3dWeightOrder) {
  const Case k = GetParam();
  const Tensor x = vidax::testing::random_tensor(Shape{k.c, k.f, k.h, k.w}, 3);
  const Tensor t = patchify(x, k.p);
  const int64_t f2 = k.f / k.p[0], h2 = k.h / k.p[1], w2 = k.w / k.p[2];
  ASSERT_EQ(t.shape(), (Shape{f2 * h2 * w2, k.c * k.p[0] * k.p[1] * k.p[2]}));
  const float* xs = x.data<float>();
  const float* ts = t.data<float>();
  // Token (f*H2 + h)*W2 + w, feature (c, a, b, d) = x[c, f*pt + a, h*ph + b, w*pw + d].
  for (int64_t fi = 0; fi < f2; ++fi)
    for (int64_t hi = 0; hi < h2; ++hi)
      for (int64_t wi = 0; wi < w2; ++wi)
        for (int64_t ci = 0; ci < k.c; ++ci)
          for (int64_t a = 0; a < k.p[0]; ++a)
            for (int64_t b = 0; b < k.p[1]; ++b)
              for (int64_t d = 0; d < k.p[2]; ++d) {
                const int64_t tok = (fi * h2 + hi) * w2 + wi;
                const int64_t feat = ((ci * k.p[0] + a) * k.p[1] + b) * k.p[2] + d;
                const int64_t src =
                    ((ci * k.f + fi * k.p[0] + a) * k.h + hi * k.p[1] + b) * k.w + wi * k.p[2] + d;
                ASSERT_EQ(ts[tok * t.dim(1) + feat], xs[src]);
              }
}

TEST_P(PatchifyTest, UnpatchifyUsesHeadOrderAndIgnoresPaddingRows) {
  const Case k = GetParam();
  const int64_t f2 = k.f / k.p[0], h2 = k.h / k.p[1], w2 = k.w / k.p[2];
  const int64_t pv = k.p[0] * k.p[1] * k.p[2];
  const int64_t n = f2 * h2 * w2;
  const Tensor tokens = vidax::testing::random_tensor(Shape{n + 3, pv * k.c}, 5);  // 3 pad rows
  const Tensor out = unpatchify(tokens, k.c, {f2, h2, w2}, k.p);
  ASSERT_EQ(out.shape(), (Shape{k.c, k.f, k.h, k.w}));
  // Head feature order is (a, b, d, c) with c fastest ("fhwpqrc->cfphqwr").
  for (int64_t ci = 0; ci < k.c; ++ci)
    for (int64_t fz = 0; fz < k.f; ++fz)
      for (int64_t hz = 0; hz < k.h; ++hz)
        for (int64_t wz = 0; wz < k.w; ++wz) {
          const int64_t tok = ((fz / k.p[0]) * h2 + hz / k.p[1]) * w2 + wz / k.p[2];
          const int64_t feat =
              (((fz % k.p[0]) * k.p[1] + hz % k.p[1]) * k.p[2] + wz % k.p[2]) * k.c + ci;
          ASSERT_EQ(out.data<float>()[((ci * k.f + fz) * k.h + hz) * k.w + wz],
                    tokens.data<float>()[tok * pv * k.c + feat]);
        }
}

INSTANTIATE_TEST_SUITE_P(Ragged, PatchifyTest,
                         ::testing::Values(Case{16, 3, 4, 6, {1, 2, 2}},
                                           Case{1, 1, 2, 2, {1, 2, 2}}, Case{5, 4, 6, 3, {2, 3, 1}},
                                           Case{36, 2, 10, 14, {1, 2, 2}}));

TEST(TimestepEmbedding, CosThenSinInDoublePrecision) {
  for (double t : {0.0, 1.0, 12.5, 731.0, 999.0}) {
    for (int64_t dim : {2, 6, 256}) {
      std::vector<float> out(static_cast<size_t>(dim));
      sinusoidal_embedding(t, dim, out.data());
      const int64_t half = dim / 2;
      for (int64_t i = 0; i < half; ++i) {
        const double freq = std::pow(10000.0, -static_cast<double>(i) / static_cast<double>(half));
        EXPECT_EQ(out[static_cast<size_t>(i)], static_cast<float>(std::cos(t * freq)));
        EXPECT_EQ(out[static_cast<size_t>(half + i)], static_cast<float>(std::sin(t * freq)));
      }
    }
  }
}

}  // namespace
}  // namespace vidax
