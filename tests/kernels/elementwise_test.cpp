// Element-wise kernels against their scalar references, on every compiled SIMD target.

#include "kernels/cpu/elementwise.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "hwy/targets.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::for_each_target;

// Distance in units in the last place (f32 values ordered as integers; subnormals included).
// NaN vs NaN is 0; NaN vs anything else is "infinite".
double ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : 1e30;
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return static_cast<double>(std::llabs(ordered(a) - ordered(b)));
}

std::vector<float> normal_floats(size_t n, uint32_t seed, float mean, float stddev) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Inputs for the unary functions: a dense sweep of [lo, hi], random values, special values.
std::vector<float> unary_inputs(float lo, float hi, size_t sweep) {
  std::vector<float> v;
  for (size_t i = 0; i <= sweep; ++i) {
    v.push_back(static_cast<float>(lo + (static_cast<double>(hi) - lo) * i / sweep));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float s :
       {0.0f,    -0.0f, 1e-30f,      -1e-30f, 1e-45f,      -1e-45f, 1e-38f, 1e-7f,        -3e-5f,
        0.5f,    -0.5f, 0.49999997f, 0.9f,    -0.8999999f, 88.7f,   88.73f, -87.4f,       -103.9f,
        -104.5f, 1e4f,  -1e4f,       3e38f,   -3e38f,      inf,     -inf,   std::nanf("")}) {
    v.push_back(s);
  }
  // Every power of two in both signs.
  for (int e = -149; e <= 127; ++e) {
    v.push_back(std::ldexp(1.0f, e));
    v.push_back(-std::ldexp(1.0f, e));
  }
  std::mt19937 gen(42);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 20000; ++i) {  // random finite bit patterns
    uint32_t u = bits(gen);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isfinite(f)) v.push_back(f);
  }
  return v;
}

using UnaryFn = void (*)(const float*, float*, int64_t);

// Max ulp error of `fn` against `ref` over `in`, on the current target; the worst input is
// reported through `worst_x`.
double max_ulp(UnaryFn fn, UnaryFn ref, const std::vector<float>& in, float& worst_x) {
  std::vector<float> got(in.size()), want(in.size());
  fn(in.data(), got.data(), static_cast<int64_t>(in.size()));
  ref(in.data(), want.data(), static_cast<int64_t>(in.size()));
  double worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    double u = ulp_distance(got[i], want[i]);
    // Results below FLT_MIN (silu and GELU of x < -87) are products of a subnormal exp with x:
    // their absolute error may reach max(4, |x|) subnormal steps.
    if (std::fabs(want[i]) < std::numeric_limits<float>::min() && std::isfinite(in[i])) {
      u = u <= std::max(4.0f, std::fabs(in[i])) ? 0 : u;
    }
    if (u > worst) {
      worst = u;
      worst_x = in[i];
    }
  }
  return worst;
}

struct UnaryCase {
  const char* name;
  UnaryFn fn;
  UnaryFn ref;
  float lo, hi;
  double max_ulp;
};

// Bounds are the measured maxima (exp/tanh 1, erf/silu/gelu_tanh 3, gelu_erf 5 ulp on every
// target) plus one ulp of margin for other compilers' contraction choices.
const UnaryCase kUnaryCases[] = {
    {"exp", exp_f32, exp_f32_reference, -105.0f, 90.0f, 2},
    {"tanh", tanh_f32, tanh_f32_reference, -12.0f, 12.0f, 2},
    {"erf", erf_f32, erf_f32_reference, -5.0f, 5.0f, 4},
    {"silu", silu, silu_reference, -110.0f, 100.0f, 4},
    {"gelu_tanh", gelu_tanh, gelu_tanh_reference, -25.0f, 25.0f, 4},
    {"gelu_erf", gelu_erf, gelu_erf_reference, -16.0f, 16.0f, 6},
};

TEST(Elementwise, TranscendentalsWithinUlpBounds) {
  for (const UnaryCase& c : kUnaryCases) {
    SCOPED_TRACE(c.name);
    // A wide sweep, plus a dense one around the origin where branches meet.
    const std::vector<float> wide = unary_inputs(c.lo, c.hi, 400000);
    const std::vector<float> near = unary_inputs(-3.0f, 3.0f, 200000);
    for_each_target([&] {
      for (const auto* in : {&wide, &near}) {
        float worst_x = 0;
        const double u = max_ulp(c.fn, c.ref, *in, worst_x);
        EXPECT_LE(u, c.max_ulp) << "worst input " << worst_x;
      }
    });
  }
}

TEST(Elementwise, TranscendentalSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  auto one = [](UnaryFn fn, float x) {
    float y;
    fn(&x, &y, 1);
    return y;
  };
  for_each_target([&] {
    EXPECT_EQ(one(exp_f32, 0.0f), 1.0f);
    EXPECT_EQ(one(exp_f32, -inf), 0.0f);
    EXPECT_EQ(one(exp_f32, inf), inf);
    EXPECT_EQ(one(exp_f32, 89.0f), inf);
    EXPECT_EQ(one(exp_f32, -104.0f), 0.0f);
    EXPECT_GT(one(exp_f32, -100.0f), 0.0f);  // subnormal, not flushed
    EXPECT_TRUE(std::isnan(one(exp_f32, NAN)));
    EXPECT_EQ(one(tanh_f32, inf), 1.0f);
    EXPECT_EQ(one(tanh_f32, -inf), -1.0f);
    EXPECT_EQ(one(tanh_f32, 1e-30f), 1e-30f);
    EXPECT_TRUE(std::signbit(one(tanh_f32, -0.0f)));
    EXPECT_TRUE(std::isnan(one(tanh_f32, NAN)));
    EXPECT_EQ(one(erf_f32, inf), 1.0f);
    EXPECT_EQ(one(erf_f32, -inf), -1.0f);
    EXPECT_TRUE(std::signbit(one(erf_f32, -0.0f)));
    EXPECT_TRUE(std::isnan(one(erf_f32, NAN)));
    EXPECT_EQ(one(gelu_tanh, 0.0f), 0.0f);
    EXPECT_EQ(one(gelu_tanh, 1e6f), 1e6f);
    EXPECT_EQ(one(gelu_tanh, -1e6f), 0.0f);
    EXPECT_EQ(one(gelu_tanh, inf), inf);
    EXPECT_EQ(one(gelu_erf, 1e6f), 1e6f);
    EXPECT_EQ(one(gelu_erf, -1e6f), 0.0f);
    EXPECT_EQ(one(gelu_erf, inf), inf);
    EXPECT_TRUE(std::isnan(one(gelu_erf, NAN)));
    EXPECT_EQ(one(silu, 0.0f), 0.0f);
    EXPECT_EQ(one(silu, 1e6f), 1e6f);
    EXPECT_EQ(one(silu, -1e6f), 0.0f);
  });
}

TEST(Elementwise, UnaryKernelsOnRaggedLengthsAndInPlace) {
  for_each_target([] {
    for (const UnaryCase& c : kUnaryCases) {
      for (int64_t n : {0, 1, 7, 15, 17, 100, 257, 1536, 40000}) {
        SCOPED_TRACE(std::string(c.name) + " n=" + std::to_string(n));
        const std::vector<float> x = normal_floats(static_cast<size_t>(n), 7, 0.0f, 3.0f);
        std::vector<float> got(static_cast<size_t>(n) + 1, 123.0f), want(got.size(), 123.0f);
        c.fn(x.data(), got.data(), n);
        c.ref(x.data(), want.data(), n);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_LE(ulp_distance(got[i], want[i]), c.max_ulp) << "x=" << x[i];
        }
        EXPECT_EQ(got.back(), 123.0f) << "wrote past the end";
        std::vector<float> alias = x;
        c.fn(alias.data(), alias.data(), n);
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(alias[i], got[i]);
      }
    }
  });
}

TEST(Elementwise, ResidualAdds) {
  for_each_target([] {
    for (int64_t rows : {1, 3, 40}) {
      for (int64_t dim : {1, 7, 17, 100, 257, 1536}) {
        SCOPED_TRACE("rows=" + std::to_string(rows) + " dim=" + std::to_string(dim));
        const size_t n = static_cast<size_t>(rows * dim);
        const std::vector<float> x0 = normal_floats(n, 1, 0.0f, 10.0f);
        const std::vector<float> y = normal_floats(n, 2, 0.0f, 1.0f);
        for (int64_t stride : {int64_t{0}, dim, 6 * dim}) {
          const std::vector<float> gate = normal_floats(
              static_cast<size_t>(rows * std::max<int64_t>(stride, 1) + dim), 3, 0.0f, 0.5f);
          std::vector<float> got = x0, want = x0;
          gated_residual_add_rows(got.data(), y.data(), gate.data(), rows, dim, stride);
          gated_residual_add_rows_reference(want.data(), y.data(), gate.data(), rows, dim, stride);
          // The multiply-add may be fused (one rounding fewer than the reference).
          for (size_t i = 0; i < n; ++i) {
            const size_t r = i / static_cast<size_t>(dim), c = i % static_cast<size_t>(dim);
            const double product =
                static_cast<double>(y[i]) * gate[r * static_cast<size_t>(stride) + c];
            ASSERT_LE(std::fabs(got[i] - want[i]),
                      std::ldexp(std::fabs(product) + std::fabs(want[i]), -23))
                << "gate stride " << stride << " element " << i;
          }
        }
        std::vector<float> got = x0, want = x0;
        add_rows(got.data(), y.data(), static_cast<int64_t>(n));
        add_rows_reference(want.data(), y.data(), static_cast<int64_t>(n));
        ASSERT_EQ(got, want);
        // x += x
        got = x0;
        add_rows(got.data(), got.data(), static_cast<int64_t>(n));
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 2 * x0[i]);
      }
    }
  });
}

// |got - want| <= atol + rtol |want| for every element.
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want,
                                 double atol, double rtol) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= atol + rtol * std::fabs(want[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Elementwise, LayerNormMatchesReference) {
  for_each_target([] {
    for (int64_t rows : {1, 3, 40}) {
      for (int64_t dim : {1, 7, 17, 100, 257, 1536}) {
        for (float offset : {0.0f, 50.0f}) {
          SCOPED_TRACE("rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                       " offset=" + std::to_string(offset));
          const size_t n = static_cast<size_t>(rows * dim);
          const std::vector<float> x = normal_floats(n, 11, offset, 2.0f);
          const std::vector<float> w = normal_floats(static_cast<size_t>(dim), 12, 1.0f, 0.3f);
          const std::vector<float> b = normal_floats(static_cast<size_t>(dim), 13, 0.0f, 0.3f);
          // Normalised outputs are O(1); a large offset costs a few bits of the centring.
          const double atol = offset == 0.0f ? 2e-6 : 2e-5;
          for (bool affine : {false, true}) {
            const float* wp = affine ? w.data() : nullptr;
            const float* bp = affine ? b.data() : nullptr;
            std::vector<float> got(n), want(n);
            layer_norm_rows(x.data(), got.data(), rows, dim, wp, bp, 1e-6f);
            layer_norm_rows_reference(x.data(), want.data(), rows, dim, wp, bp, 1e-6f);
            EXPECT_TRUE(close(got, want, atol, 2e-6)) << "affine " << affine;
            std::vector<float> alias = x;
            layer_norm_rows(alias.data(), alias.data(), rows, dim, wp, bp, 1e-6f);
            EXPECT_EQ(alias, got);
          }
          // Weight only and bias only.
          std::vector<float> got(n), want(n);
          layer_norm_rows(x.data(), got.data(), rows, dim, w.data(), nullptr, 1e-5f);
          layer_norm_rows_reference(x.data(), want.data(), rows, dim, w.data(), nullptr, 1e-5f);
          EXPECT_TRUE(close(got, want, atol, 2e-6));
          layer_norm_rows(x.data(), got.data(), rows, dim, nullptr, b.data(), 1e-5f);
          layer_norm_rows_reference(x.data(), want.data(), rows, dim, nullptr, b.data(), 1e-5f);
          EXPECT_TRUE(close(got, want, atol, 2e-6));
        }
      }
    }
  });
}

TEST(Elementwise, LayerNormModulateMatchesReference) {
  for_each_target([] {
    for (int64_t rows : {1, 5, 40}) {
      for (int64_t dim : {1, 7, 17, 100, 257, 1536}) {
        // 0: one vector for all rows (Wan 2.1); dim: per-token; 6 * dim: per-token, interleaved
        // with the other modulation chunks (Wan 2.2's [tokens, 6, dim] layout).
        for (int64_t stride : {int64_t{0}, dim, 6 * dim}) {
          SCOPED_TRACE("rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                       " stride=" + std::to_string(stride));
          const size_t n = static_cast<size_t>(rows * dim);
          const std::vector<float> x = normal_floats(n, 21, 0.5f, 3.0f);
          const size_t mod_size = static_cast<size_t>(rows * std::max<int64_t>(stride, dim) + dim);
          const std::vector<float> shift = normal_floats(mod_size, 22, 0.0f, 0.5f);
          const std::vector<float> scale = normal_floats(mod_size, 23, 0.0f, 0.5f);
          std::vector<float> got(n), want(n);
          layer_norm_modulate_rows(x.data(), got.data(), rows, dim, shift.data(), scale.data(),
                                   stride, 1e-6f);
          layer_norm_modulate_rows_reference(x.data(), want.data(), rows, dim, shift.data(),
                                             scale.data(), stride, 1e-6f);
          EXPECT_TRUE(close(got, want, 4e-6, 4e-6));
          std::vector<float> alias = x;
          layer_norm_modulate_rows(alias.data(), alias.data(), rows, dim, shift.data(),
                                   scale.data(), stride, 1e-6f);
          EXPECT_EQ(alias, got);
          // The bf16 variant is the f32 result rounded to nearest even.
          std::vector<BFloat16> got16(n + 3, BFloat16{0xdead});
          layer_norm_modulate_rows_bf16(x.data(), got16.data(), rows, dim, shift.data(),
                                        scale.data(), stride, 1e-6f);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(got16[i].bits, f32_to_bf16(got[i])) << i;
          EXPECT_EQ(got16[n].bits, 0xdead) << "wrote past the end";
          std::vector<BFloat16> want16(n);
          layer_norm_modulate_rows_bf16_reference(x.data(), want16.data(), rows, dim, shift.data(),
                                                  scale.data(), stride, 1e-6f);
          for (size_t i = 0; i < n; ++i) {
            // At most one bf16 step apart (the f32 values may straddle a rounding boundary).
            ASSERT_LE(std::abs(got16[i].bits - want16[i].bits), 1) << i;
          }
        }
      }
    }
  });
}

TEST(Elementwise, RmsNormMatchesReference) {
  for_each_target([] {
    for (int64_t rows : {1, 3, 40}) {
      for (int64_t dim : {1, 7, 17, 100, 257, 1536}) {
        SCOPED_TRACE("rows=" + std::to_string(rows) + " dim=" + std::to_string(dim));
        const size_t n = static_cast<size_t>(rows * dim);
        const std::vector<float> x = normal_floats(n, 31, 0.3f, 4.0f);
        const std::vector<float> w = normal_floats(static_cast<size_t>(dim), 32, 1.0f, 0.3f);
        for (const float* wp : {static_cast<const float*>(nullptr), w.data()}) {
          std::vector<float> got(n), want(n);
          rms_norm_rows(x.data(), got.data(), rows, dim, wp, 1e-6f);
          rms_norm_rows_reference(x.data(), want.data(), rows, dim, wp, 1e-6f);
          EXPECT_TRUE(close(got, want, 1e-6, 2e-6));
          std::vector<float> alias = x;
          rms_norm_rows(alias.data(), alias.data(), rows, dim, wp, 1e-6f);
          EXPECT_EQ(alias, got);
        }
      }
    }
  });
}

TEST(Elementwise, NormAnalyticProperties) {
  // A constant row normalises to exactly zero (plus bias); dim 1 likewise.
  for (int64_t dim : {1, 3, 100, 1536}) {
    std::vector<float> x(static_cast<size_t>(dim), 3.0f), y(x.size());
    const std::vector<float> b(x.size(), 0.25f);
    layer_norm_rows(x.data(), y.data(), 1, dim, nullptr, b.data(), 1e-6f);
    for (float v : y) EXPECT_EQ(v, 0.25f) << dim;
  }
  // Normalised rows have mean 0 and (biased) variance 1 / (1 + eps / var).
  const int64_t rows = 8, dim = 1536;
  const std::vector<float> x = normal_floats(static_cast<size_t>(rows * dim), 5, -2.0f, 7.0f);
  std::vector<float> y(x.size());
  layer_norm_rows(x.data(), y.data(), rows, dim, nullptr, nullptr, 1e-6f);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, sq = 0;
    for (int64_t i = 0; i < dim; ++i) s += y[static_cast<size_t>(r * dim + i)];
    for (int64_t i = 0; i < dim; ++i) {
      const double v = y[static_cast<size_t>(r * dim + i)];
      sq += v * v;
    }
    EXPECT_NEAR(s / dim, 0.0, 1e-6);
    EXPECT_NEAR(sq / dim, 1.0, 1e-5);
  }
  // RMSNorm output has mean square 1 (up to eps).
  rms_norm_rows(x.data(), y.data(), rows, dim, nullptr, 1e-6f);
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const double v = y[static_cast<size_t>(r * dim + i)];
      sq += v * v;
    }
    EXPECT_NEAR(sq / dim, 1.0, 1e-5);
  }
  // Modulation with zero shift/scale is plain LayerNorm.
  const std::vector<float> zeros(static_cast<size_t>(dim), 0.0f);
  std::vector<float> ln(x.size()), mod(x.size());
  layer_norm_rows(x.data(), ln.data(), rows, dim, nullptr, nullptr, 1e-6f);
  layer_norm_modulate_rows(x.data(), mod.data(), rows, dim, zeros.data(), zeros.data(), 0, 1e-6f);
  EXPECT_EQ(ln, mod);
}

TEST(Elementwise, ThreadCountDoesNotChangeResults) {
  const int64_t rows = 64, dim = 1536;  // enough work to split over the pool
  const std::vector<float> x = normal_floats(static_cast<size_t>(rows * dim), 9, 0.0f, 2.0f);
  const std::vector<float> sh = normal_floats(static_cast<size_t>(dim), 10, 0.0f, 0.5f);
  auto run = [&] {
    std::vector<float> a(x.size()), b(x.size());
    layer_norm_modulate_rows(x.data(), a.data(), rows, dim, sh.data(), sh.data(), 0, 1e-6f);
    gelu_tanh(x.data(), b.data(), rows * dim);
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = run();
  omp_set_num_threads(3);
  const std::vector<float> three = run();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, three);
}

}  // namespace
}  // namespace vidax
