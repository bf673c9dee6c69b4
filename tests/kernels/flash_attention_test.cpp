// Differential tests of the flash attention kernels against the scalar double-precision
// reference, on ragged sizes, strided views, padding (kv_valid < kv_len), large-magnitude scores
// and every Highway target this machine supports.
#include "kernels/cpu/flash_attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "hwy/highway.h"
#include "hwy/targets.h"
#include "kernels/cpu/attention_reference.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using ::vidax::testing::all_close;
using ::vidax::testing::random_floats;

enum class Layout {
  kPacked,  // q, k, v, out each [tokens, heads, head_dim]
  kPadded,  // rows with extra elements in between (odd strides)
  kQkv,     // q, k, v views into one [tokens, 3, heads, head_dim] buffer (self-attention)
};

struct Case {
  int64_t q_len, kv_len, kv_valid, heads, head_dim;
  Layout layout = Layout::kPacked;
  float amplitude = 1.0f;  // q and k are uniform in [-amplitude, amplitude]
};

std::string describe(const Case& c) {
  static const char* kLayouts[] = {"packed", "padded", "qkv"};
  return str_cat("q_len=", c.q_len, " kv_len=", c.kv_len, " kv_valid=", c.kv_valid,
                 " heads=", c.heads, " head_dim=", c.head_dim,
                 " layout=", kLayouts[static_cast<int>(c.layout)], " amplitude=", c.amplitude);
}

// Inputs of one case as f32 (already bf16-rounded when `bf16`) and, for bf16, the raw bits.
struct Problem {
  AttentionDims dims{};
  std::vector<float> q, k, v;               // buffers the strided views point into
  int64_t q_off = 0, k_off = 0, v_off = 0;  // view offsets inside the buffers
  std::vector<BFloat16> qb, kb, vb;

  Problem(const Case& c, uint32_t seed, bool bf16) {
    const int64_t row = c.heads * c.head_dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    dims = {c.q_len, c.kv_len, c.kv_valid, c.heads, c.head_dim, row, row, row, row, scale};
    if (c.layout == Layout::kPadded) {
      dims.q_stride = row + 5;
      dims.k_stride = row + 3;
      dims.v_stride = row + 11;
      dims.out_stride = row + 1;
    }
    auto fill = [](int64_t rows, int64_t stride, float amp, uint32_t s) {
      return random_floats(static_cast<size_t>(rows * stride), s, -amp, amp);
    };
    if (c.layout == Layout::kQkv) {
      EXPECT_EQ(c.q_len, c.kv_len);
      dims.q_stride = dims.k_stride = dims.v_stride = 3 * row;
      // One buffer: q and k parts scaled by the amplitude, v part in [-1, 1].
      q = fill(c.kv_len, 3 * row, 1.0f, seed);
      for (int64_t t = 0; t < c.kv_len; ++t) {
        for (int64_t e = 0; e < 2 * row; ++e)
          q[static_cast<size_t>(t * 3 * row + e)] *= c.amplitude;
      }
      k_off = row;
      v_off = 2 * row;
    } else {
      q = fill(c.q_len, dims.q_stride, c.amplitude, seed);
      k = fill(c.kv_len, dims.k_stride, c.amplitude, seed + 1);
      v = fill(c.kv_len, dims.v_stride, 1.0f, seed + 2);
    }
    if (bf16) {
      for (auto* buf : {&q, &k, &v}) {
        for (float& x : *buf) x = bf16_to_f32(f32_to_bf16(x));
      }
      auto to_bf16 = [](const std::vector<float>& x) {
        std::vector<BFloat16> r(x.size());
        for (size_t i = 0; i < x.size(); ++i) r[i].bits = f32_to_bf16(x[i]);
        return r;
      };
      qb = to_bf16(q);
      kb = to_bf16(k);
      vb = to_bf16(v);
    }
  }
  const std::vector<float>& kbuf() const { return k.empty() ? q : k; }
  const std::vector<float>& vbuf() const { return v.empty() ? q : v; }
  const std::vector<BFloat16>& kbbuf() const { return kb.empty() ? qb : kb; }
  const std::vector<BFloat16>& vbbuf() const { return vb.empty() ? qb : vb; }

  std::vector<float> make_out() const {
    // Filled with a sentinel so that writes outside the heads' slices would be caught.
    return std::vector<float>(static_cast<size_t>(dims.q_len * dims.out_stride), 12345.0f);
  }
  std::vector<float> reference() const {
    std::vector<float> out = make_out();
    attention_reference(q.data() + q_off, kbuf().data() + k_off, vbuf().data() + v_off, out.data(),
                        dims);
    return out;
  }
  std::vector<float> run_f32() const {
    std::vector<float> out = make_out();
    flash_attention(q.data() + q_off, kbuf().data() + k_off, vbuf().data() + v_off, out.data(),
                    dims);
    return out;
  }
  template <class Fn>
  std::vector<float> run_bf16(Fn fn) const {
    std::vector<float> out = make_out();
    fn(qb.data() + q_off, kbbuf().data() + k_off, vbbuf().data() + v_off, out.data(), dims);
    return out;
  }
};

// Compares the [q_len, heads, head_dim] slices of two strided outputs and checks that the
// padding between rows was left untouched.
::testing::AssertionResult outputs_close(const std::vector<float>& actual,
                                         const std::vector<float>& reference,
                                         const AttentionDims& d, double atol, double rtol,
                                         const std::string& what) {
  const int64_t row = d.heads * d.head_dim;
  std::vector<float> a, r;
  for (int64_t t = 0; t < d.q_len; ++t) {
    for (int64_t e = 0; e < d.out_stride; ++e) {
      const size_t i = static_cast<size_t>(t * d.out_stride + e);
      if (e < row) {
        a.push_back(actual[i]);
        r.push_back(reference[i]);
      } else if (actual[i] != 12345.0f) {
        return ::testing::AssertionFailure() << what << ": wrote padding at row " << t;
      }
    }
  }
  const Shape shape{d.q_len, d.heads, d.head_dim};
  if (a.empty()) return ::testing::AssertionSuccess();
  return all_close(Tensor::from_floats(a, shape), Tensor::from_floats(r, shape), atol, rtol, what);
}

std::vector<Case> ragged_cases() {
  std::vector<Case> cases;
  const int64_t dims[] = {40, 72, 100, 128};
  const int64_t lens[][3] = {{1, 1, 1},       {7, 7, 5},     {33, 129, 129}, {129, 33, 20},
                             {300, 300, 300}, {1, 300, 257}, {65, 64, 64},   {61, 130, 128}};
  int i = 0;
  for (const auto& l : lens) {
    for (int64_t hd : dims) {
      const Layout layout = static_cast<Layout>(i % 2);  // packed / padded alternately
      cases.push_back({l[0], l[1], l[2], 1 + i % 3, hd, layout});
      ++i;
    }
  }
  cases.push_back({129, 129, 129, 2, 128, Layout::kQkv});
  cases.push_back({300, 300, 211, 3, 72, Layout::kQkv});
  cases.push_back({3, 2000, 1999, 3, 128, Layout::kPadded});  // many key steps, tiny q
  cases.push_back({7, 7, 7, 2, 1, Layout::kPadded});
  cases.push_back({9, 17, 13, 2, 3, Layout::kPacked});
  return cases;
}

// Scores of magnitude ~300 so that the running maximum changes by large amounts between blocks
// and exp of unshifted scores would overflow.
std::vector<Case> large_score_cases() {
  return {{129, 300, 300, 2, 128, Layout::kPacked, 30.0f},
          {33, 129, 100, 3, 72, Layout::kPadded, 30.0f},
          {300, 300, 290, 1, 100, Layout::kQkv, 30.0f},
          {65, 200, 200, 1, 40, Layout::kPacked, 30.0f}};
}

// f32 path: the only differences to the double reference are f32 rounding in the dot products,
// the exp and the accumulation.
TEST(FlashAttention, F32MatchesReference) {
  uint32_t seed = 1;
  for (const Case& c : ragged_cases()) {
    const Problem p(c, seed++, /*bf16=*/false);
    EXPECT_TRUE(outputs_close(p.run_f32(), p.reference(), p.dims, 2e-6, 1e-5, describe(c)));
  }
}

// With scores ~300 the f32 rounding of the dot products alone moves scores by ~1e-4 (log
// domain), hence weights by ~1e-4 relative: a plain f32 dot product followed by a double softmax
// shows the same ~1.7e-4 worst error as the kernel on these cases, so the bound is looser.
TEST(FlashAttention, F32LargeScores) {
  uint32_t seed = 100;
  for (const Case& c : large_score_cases()) {
    const Problem p(c, seed++, /*bf16=*/false);
    EXPECT_TRUE(outputs_close(p.run_f32(), p.reference(), p.dims, 4e-4, 1e-4, describe(c)));
  }
}

const char* kernel_name(AttentionBf16Kernel k) {
  static const char* kNames[] = {"auto", "widened", "avx512bf16", "amx"};
  return kNames[static_cast<int>(k)];
}

// Runs one bf16 kernel on a problem.
std::vector<float> run_kernel(const Problem& p, AttentionBf16Kernel kernel) {
  return p.run_bf16([kernel](auto... args) { flash_attention_bf16(kernel, args...); });
}

// Widened bf16 path: inputs are exact in f32 and P stays f32, so it is as accurate as f32.
TEST(FlashAttention, Bf16WidenedMatchesReference) {
  uint32_t seed = 200;
  for (const Case& c : ragged_cases()) {
    const Problem p(c, seed++, /*bf16=*/true);
    const auto out = run_kernel(p, AttentionBf16Kernel::kWidened);
    EXPECT_TRUE(outputs_close(out, p.reference(), p.dims, 2e-6, 1e-5, describe(c)));
  }
}

// Default bf16 path (AVX512-BF16 where available): P is rounded to bf16 (relative error up to
// 2^-9) before P.V and the row sums add the rounded P, so each normalised weight is off by at
// most ~2^-8 relative and outputs (averages of |v| <= 1) by at most ~4e-3; measured worst cases
// are ~1e-3 when few keys dominate (large scores) and ~1e-4 when hundreds of keys contribute.
constexpr double kBf16Atol = 4e-3;
// Every bf16 kernel this machine can run (the ones it cannot are reported as skipped).
TEST(FlashAttention, Bf16KernelsMatchReference) {
  std::printf("[ INFO     ] flash_attention target: %s\n", flash_attention_target().c_str());
  for (auto kernel :
       {AttentionBf16Kernel::kAuto, AttentionBf16Kernel::kAvx512Bf16, AttentionBf16Kernel::kAmx}) {
    if (!flash_attention_bf16_available(kernel)) {
      std::printf("[ INFO     ] bf16 kernel %s not available here: not tested\n",
                  kernel_name(kernel));
      continue;
    }
    uint32_t seed = 300;
    std::vector<Case> cases = ragged_cases();
    for (const Case& c : large_score_cases()) cases.push_back(c);
    for (const Case& c : cases) {
      const Problem p(c, seed++, /*bf16=*/true);
      EXPECT_TRUE(outputs_close(run_kernel(p, kernel), p.reference(), p.dims, kBf16Atol, 0,
                                std::string(kernel_name(kernel)) + " " + describe(c)));
    }
  }
}

// kv_last_repeat: the last valid key counts as that many identical keys. Every kernel against
// the reference (which weights the key's term by the count), on cases whose last key sits at the
// start, middle and end of a key block and of an AMX step (kv_valid 1, 64, 65, 128, 129, ...).
std::vector<Case> repeat_cases() {
  return {{5, 1, 1, 2, 128, Layout::kPacked},       {33, 64, 64, 1, 128, Layout::kPadded},
          {17, 70, 65, 2, 72, Layout::kPacked},     {40, 128, 128, 3, 128, Layout::kPadded},
          {129, 129, 129, 2, 100, Layout::kPacked}, {300, 300, 211, 2, 128, Layout::kQkv},
          {9, 78, 78, 12, 128, Layout::kPacked}};
}

TEST(FlashAttention, RepeatedLastKeyMatchesReference) {
  uint32_t seed = 700;
  for (const int64_t repeat : {int64_t{2}, int64_t{7}, int64_t{435}}) {
    for (const Case& c : repeat_cases()) {
      Problem p(c, seed++, /*bf16=*/false);
      p.dims.kv_last_repeat = repeat;
      const std::string what = describe(c) + " repeat=" + std::to_string(repeat);
      const auto ref = p.reference();
      EXPECT_TRUE(outputs_close(p.run_f32(), ref, p.dims, 2e-6, 1e-5, "f32 " + what));
      Problem pb(c, seed++, /*bf16=*/true);
      pb.dims.kv_last_repeat = repeat;
      const auto refb = pb.reference();
      for (auto kernel : {AttentionBf16Kernel::kWidened, AttentionBf16Kernel::kAvx512Bf16,
                          AttentionBf16Kernel::kAmx}) {
        if (!flash_attention_bf16_available(kernel)) continue;
        const double atol = kernel == AttentionBf16Kernel::kWidened ? 2e-6 : kBf16Atol;
        EXPECT_TRUE(outputs_close(run_kernel(pb, kernel), refb, pb.dims, atol,
                                  kernel == AttentionBf16Kernel::kWidened ? 1e-5 : 0,
                                  std::string(kernel_name(kernel)) + " " + what));
      }
    }
  }
}

// The Wan text case, stated directly: 77 keys followed by 435 copies of one padding key give the
// same output as the 77 keys plus that key once with kv_last_repeat = 435, whatever the kernel.
TEST(FlashAttention, RepeatedLastKeyEqualsExplicitCopies) {
  const int64_t heads = 2, hd = 128, real = 77, copies = 435, q_len = 50, row = heads * hd;
  const int64_t full = real + copies;  // 512 keys, the last 435 identical
  std::vector<float> q = random_floats(static_cast<size_t>(q_len * row), 11, -1, 1);
  std::vector<float> k = random_floats(static_cast<size_t>(full * row), 12, -1, 1);
  std::vector<float> v = random_floats(static_cast<size_t>(full * row), 13, -1, 1);
  for (int64_t t = real + 1; t < full; ++t) {
    std::copy_n(k.begin() + real * row, row, k.begin() + t * row);
    std::copy_n(v.begin() + real * row, row, v.begin() + t * row);
  }
  for (auto* buf : {&q, &k, &v}) {  // bf16-exact, so that every kernel sees the same inputs
    for (float& x : *buf) x = bf16_to_f32(f32_to_bf16(x));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const AttentionDims expanded{q_len, full, full, heads, hd, row, row, row, row, scale};
  AttentionDims compact = expanded;
  compact.kv_len = compact.kv_valid = real + 1;
  compact.kv_last_repeat = copies;
  std::vector<float> want(static_cast<size_t>(q_len * row)), got(want.size());
  attention_reference(q.data(), k.data(), v.data(), want.data(), expanded);
  flash_attention(q.data(), k.data(), v.data(), got.data(), compact);
  const Shape shape{q_len, heads, hd};
  EXPECT_TRUE(all_close(Tensor::from_floats(got, shape), Tensor::from_floats(want, shape), 2e-6,
                        1e-5, "f32 compact vs 512 explicit keys"));
  auto to_bf16 = [](const std::vector<float>& x) {
    std::vector<BFloat16> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i].bits = f32_to_bf16(x[i]);
    return r;
  };
  const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
  std::vector<float> dense16(want.size()), compact16(want.size());
  flash_attention(qb.data(), kb.data(), vb.data(), dense16.data(), expanded);
  flash_attention(qb.data(), kb.data(), vb.data(), compact16.data(), compact);
  EXPECT_TRUE(all_close(Tensor::from_floats(compact16, shape), Tensor::from_floats(want, shape),
                        kBf16Atol, 0, "bf16 compact vs 512 explicit keys"));
  EXPECT_TRUE(all_close(Tensor::from_floats(dense16, shape), Tensor::from_floats(want, shape),
                        kBf16Atol, 0, "bf16 on the 512 explicit keys"));
}

TEST(FlashAttention, UnavailableKernelThrows) {
  const float x = 1.0f;
  const BFloat16 b{f32_to_bf16(x)};
  float out = 0;
  const AttentionDims d{1, 1, 1, 1, 1, 1, 1, 1, 1, 1.0f};
  for (auto kernel : {AttentionBf16Kernel::kAvx512Bf16, AttentionBf16Kernel::kAmx}) {
    if (flash_attention_bf16_available(kernel)) {
      EXPECT_NO_THROW(flash_attention_bf16(kernel, &b, &b, &b, &out, d));
      EXPECT_EQ(out, x);
    } else {
      EXPECT_THROW(flash_attention_bf16(kernel, &b, &b, &b, &out, d), InternalError);
    }
  }
}

// When every value row is the same vector the output must reproduce it, whatever the weights;
// with bf16 P this holds because the row sums add the same rounded P.
TEST(FlashAttention, ConstantValuesAreReproduced) {
  const Case c{70, 150, 140, 2, 72, Layout::kPacked, 5.0f};
  Problem p(c, 7, /*bf16=*/true);
  for (int64_t t = 0; t < c.kv_len; ++t) {
    for (int64_t e = 0; e < c.heads * c.head_dim; ++e) {
      const float x = bf16_to_f32(f32_to_bf16(0.25f + 0.01f * static_cast<float>(e % 50)));
      p.v[static_cast<size_t>(t * p.dims.v_stride + e)] = x;
      p.vb[static_cast<size_t>(t * p.dims.v_stride + e)].bits = f32_to_bf16(x);
    }
  }
  const auto ref = p.reference();
  EXPECT_TRUE(outputs_close(p.run_f32(), ref, p.dims, 0, 1e-6, "f32"));
  for (auto kernel : {AttentionBf16Kernel::kWidened, AttentionBf16Kernel::kAvx512Bf16,
                      AttentionBf16Kernel::kAmx}) {
    if (!flash_attention_bf16_available(kernel)) continue;
    EXPECT_TRUE(outputs_close(run_kernel(p, kernel), ref, p.dims, 0, 1e-6, kernel_name(kernel)));
  }
}

// Negative and zero scales are legal: softmax of -|scale| q k^T (the row *minimum* of q k^T is
// the stable shift) and, for 0, the plain mean of the valid value rows.
TEST(FlashAttention, NegativeAndZeroScale) {
  uint32_t seed = 500;
  for (float scale : {-0.3f, 0.0f}) {
    const Case c{37, 150, 133, 2, 72, Layout::kPadded};
    Problem f(c, seed, /*bf16=*/false);
    f.dims.scale = scale;
    EXPECT_TRUE(outputs_close(f.run_f32(), f.reference(), f.dims, 2e-6, 1e-5, "f32"));
    Problem b(c, seed++, /*bf16=*/true);
    b.dims.scale = scale;
    for (auto kernel : {AttentionBf16Kernel::kWidened, AttentionBf16Kernel::kAvx512Bf16,
                        AttentionBf16Kernel::kAmx}) {
      if (!flash_attention_bf16_available(kernel)) continue;
      const double atol = kernel == AttentionBf16Kernel::kWidened ? 2e-6 : kBf16Atol;
      EXPECT_TRUE(
          outputs_close(run_kernel(b, kernel), b.reference(), b.dims, atol, 0,
                        std::string(kernel_name(kernel)) + " scale " + std::to_string(scale)));
    }
  }
}

// A single valid key: the output is that key's value row.
TEST(FlashAttention, SingleValidKeyCopiesValue) {
  const Case c{5, 40, 1, 2, 100, Layout::kPadded};
  const Problem p(c, 11, /*bf16=*/true);
  for (auto kernel : {AttentionBf16Kernel::kWidened, AttentionBf16Kernel::kAvx512Bf16,
                      AttentionBf16Kernel::kAmx}) {
    if (!flash_attention_bf16_available(kernel)) continue;
    const auto out = run_kernel(p, kernel);
    for (int64_t i = 0; i < c.q_len; ++i) {
      for (int64_t e = 0; e < c.heads * c.head_dim; ++e) {
        ASSERT_EQ(out[static_cast<size_t>(i * p.dims.out_stride + e)], p.v[static_cast<size_t>(e)])
            << kernel_name(kernel);
      }
    }
  }
}

// Each query row is computed by the same sequence of operations whatever the block it falls in,
// so the thread count (which changes the query blocking) must not change a single bit.
TEST(FlashAttention, ResultsIndependentOfThreadCount) {
  const Case c{250, 190, 177, 3, 128, Layout::kPadded};
  const Problem p(c, 21, /*bf16=*/true);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto f1 = p.run_f32();
  const auto b1 = p.run_bf16([](auto... a) { flash_attention(a...); });
  const auto w1 = run_kernel(p, AttentionBf16Kernel::kWidened);
  omp_set_num_threads(std::max(2, saved));
  const auto f2 = p.run_f32();
  const auto b2 = p.run_bf16([](auto... a) { flash_attention(a...); });
  const auto w2 = run_kernel(p, AttentionBf16Kernel::kWidened);
  omp_set_num_threads(saved);
  EXPECT_EQ(f1, f2);
  EXPECT_EQ(b1, b2);
  EXPECT_EQ(w1, w2);
}

// Runs every compiled Highway target the CPU supports (XNNPACK-style: every ISA path tested).
TEST(FlashAttention, EveryHighwayTarget) {
  const std::vector<Case> cases = {{33, 129, 100, 2, 72, Layout::kPadded},
                                   {70, 70, 70, 1, 128, Layout::kQkv},
                                   {17, 65, 65, 3, 40, Layout::kPacked, 30.0f}};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = flash_attention_target();
    std::printf("[ INFO     ] testing target %s\n", name.c_str());
    EXPECT_EQ(name.rfind(std::string(hwy::TargetName(target)) + ",", 0), 0u) << name;
    uint32_t seed = 400;
    for (const Case& c : cases) {
      const Problem f(c, seed, /*bf16=*/false);
      const double atol = c.amplitude > 1 ? 4e-4 : 2e-6, rtol = c.amplitude > 1 ? 1e-4 : 1e-5;
      EXPECT_TRUE(outputs_close(f.run_f32(), f.reference(), f.dims, atol, rtol,
                                name + " f32 " + describe(c)));
      const Problem b(c, seed++, /*bf16=*/true);
      EXPECT_TRUE(outputs_close(b.run_bf16([](auto... a) { flash_attention(a...); }), b.reference(),
                                b.dims, kBf16Atol, 0, name + " bf16 " + describe(c)));
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(FlashAttention, DispatchPicksSimdTarget) {
  const std::string name = flash_attention_target();
  std::printf("[ INFO     ] flash_attention dispatches to %s\n", name.c_str());
  EXPECT_EQ(name.find("EMU128"), std::string::npos);
  EXPECT_EQ(name.find("SCALAR"), std::string::npos);
}

TEST(FlashAttention, EmptyQueryIsNoOp) {
  const float x = 1.0f;
  float out = 7.0f;
  const AttentionDims d{0, 1, 1, 1, 1, 1, 1, 1, 1, 1.0f};
  flash_attention(&x, &x, &x, &out, d);
  EXPECT_EQ(out, 7.0f);
}

TEST(FlashAttention, RejectsInconsistentDims) {
  const std::vector<float> buf(64, 0.0f);
  std::vector<float> out(64);
  const AttentionDims good{2, 2, 2, 2, 4, 8, 8, 8, 8, 0.5f};
  EXPECT_NO_THROW(flash_attention(buf.data(), buf.data(), buf.data(), out.data(), good));
  auto bad = [&](auto mutate) {
    AttentionDims d = good;
    mutate(d);
    return d;
  };
  const AttentionDims cases[] = {
      bad([](AttentionDims& d) { d.kv_valid = 0; }),
      bad([](AttentionDims& d) { d.kv_valid = 3; }),
      bad([](AttentionDims& d) { d.kv_len = 0; }),
      bad([](AttentionDims& d) { d.heads = 0; }),
      bad([](AttentionDims& d) { d.head_dim = 0; }),
      bad([](AttentionDims& d) { d.q_len = -1; }),
      bad([](AttentionDims& d) { d.q_stride = 7; }),
      bad([](AttentionDims& d) { d.out_stride = 4; }),
      bad([](AttentionDims& d) { d.scale = NAN; }),
      bad([](AttentionDims& d) { d.kv_last_repeat = 0; }),
      bad([](AttentionDims& d) {
        d.kv_last_repeat = 2;
        d.scale = 0;
      }),
  };
  for (const AttentionDims& d : cases) {
    EXPECT_THROW(flash_attention(buf.data(), buf.data(), buf.data(), out.data(), d), InternalError);
    EXPECT_THROW(attention_reference(buf.data(), buf.data(), buf.data(), out.data(), d),
                 InternalError);
  }
  EXPECT_THROW(flash_attention(nullptr, buf.data(), buf.data(), out.data(), good), InternalError);
}

}  // namespace
}  // namespace vidax
