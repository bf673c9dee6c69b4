// Channel-group reuse in one kernel (amx_gemm_bf16_reuse): the plain C++ reference against a
// dense product (first call, nothing moved, a few groups moved) on any machine; on AMX machines
// the kernel against the reference over several calls on ragged shapes (K in several chunks,
// several 256-row blocks, f32 and bf16 inputs and outputs, GELU), the same decisions, x_ref and
// sums of squares bit for bit, its first call equal to amx_gemm_bf16 bit for bit.
#include "kernels/cpu/amx_reuse_gemm.h"

#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/channel_reuse.h"
#include "kernels/cpu/cpu_features.h"
#include "support/test_support.h"

namespace vidax {
namespace {

std::vector<BFloat16> random_bf16(size_t count, std::mt19937& rng, float scale = 1.f) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<BFloat16> v(count);
  for (auto& e : v) e.bits = f32_to_bf16(d(rng));
  return v;
}

float value(BFloat16 v) { return bf16_to_f32(v.bits); }

// x . W^T + bias in double, for row r and column c (W row-major [n, k]).
double dense(const std::vector<BFloat16>& x, const std::vector<BFloat16>& w,
             const std::vector<float>& bias, int64_t k, int64_t r, int64_t c) {
  double s = bias.empty() ? 0.0 : bias[static_cast<size_t>(c)];
  for (int64_t i = 0; i < k; ++i)
    s += static_cast<double>(value(x[static_cast<size_t>(r * k + i)])) *
         value(w[static_cast<size_t>(c * k + i)]);
  return s;
}

// The next step's input: per (32-row block, group), either every row stays within a small
// wobble (the block can skip the group) or each row moves far with probability 0.3.
std::vector<BFloat16> next_input(const std::vector<BFloat16>& x, int64_t m, int64_t k,
                                 std::mt19937& rng) {
  std::bernoulli_distribution still_block(0.5), move_row(0.3);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<BFloat16> y = x;
  for (int64_t b = 0; b < (m + 31) / 32; ++b)
    for (int64_t g = 0; g < (k + 31) / 32; ++g) {
      const bool still = still_block(rng);
      for (int64_t r = b * 32; r < std::min(m, b * 32 + 32); ++r) {
        const float amount = !still && move_row(rng) ? 2.f : 0.01f;
        for (int64_t c = g * 32; c < std::min(k, g * 32 + 32); ++c) {
          BFloat16& v = y[static_cast<size_t>(r * k + c)];
          v.bits = f32_to_bf16(value(v) + amount * d(rng));
        }
      }
    }
  return y;
}

// thresh x each channel's RMS over the last call's rows, as accel/kaleido.cpp computes it.
std::vector<float> limits(const std::vector<float>& sumsq, int64_t m, float thresh) {
  std::vector<float> l(sumsq.size());
  for (size_t c = 0; c < l.size(); ++c) l[c] = thresh * std::sqrt(sumsq[c] / static_cast<float>(m));
  return l;
}

struct Sim {  // one reuse state and its buffers
  std::vector<BFloat16> ref;
  std::vector<float> kept, sumsq;
  AmxReuseState state(const std::vector<float>* limit, bool first) {
    AmxReuseState s;
    s.ref = ref.data();
    s.kept = kept.data();
    s.sumsq = sumsq.data();
    s.limit = limit != nullptr ? limit->data() : nullptr;
    s.first = first;
    return s;
  }
};

TEST(AmxReuseGemm, ReferenceFollowsTheDenseProduct) {
  std::mt19937 rng(11);
  const int64_t m = 45, n = 37, k = 70;
  const std::vector<BFloat16> wv = random_bf16(static_cast<size_t>(n * k), rng, 0.2f);
  std::vector<float> bias(static_cast<size_t>(n));
  for (auto& b : bias) b = 0.1f * static_cast<float>(&b - bias.data()) - 1.f;
  const AmxPackedWeight w(wv.data(), n, k, bias.data());
  const std::vector<BFloat16> x = random_bf16(static_cast<size_t>(m * k), rng);
  Sim s{std::vector<BFloat16>(x.size()),
        std::vector<float>(static_cast<size_t>(amx_reuse_kept_elements(m, w))),
        std::vector<float>(static_cast<size_t>(k))};
  std::vector<float> y(static_cast<size_t>(m * n));
  auto kept_at = [&](const std::vector<float>& kept, int64_t r, int64_t c) {
    return kept[static_cast<size_t>(amx_reuse_kept_index(m, r, c))];
  };
  // First call: the dense product with its bias; x_ref = x.
  AmxReuseCounts c = gemm_reuse_reference(x.data(), m, k, w, GemmEpilogue::kNone,
                                          s.state(nullptr, true), y.data());
  EXPECT_EQ(c.groups_reused, 0);
  EXPECT_EQ(c.steps_skipped, 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t col = 0; col < n; ++col)
      ASSERT_NEAR(y[static_cast<size_t>(r * n + col)], dense(x, wv, bias, k, r, col), 1e-4);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(s.ref[i].bits, x[i].bits);
  // Nothing moved beyond a generous limit: the kept product and the output stay.
  const std::vector<float> wide(static_cast<size_t>(k), 100.f);
  const std::vector<float> kept = s.kept;
  std::vector<BFloat16> x2 = x;
  x2[3].bits = f32_to_bf16(value(x2[3]) + 0.5f);  // moved, but within the limit
  c = gemm_reuse_reference(x2.data(), m, k, w, GemmEpilogue::kNone, s.state(&wide, false),
                           y.data());
  EXPECT_EQ(c.groups_reused, m * 3);
  EXPECT_EQ(c.steps_skipped, 2 * 3);  // 2 row blocks x 3 groups
  EXPECT_DOUBLE_EQ(c.flops_skipped, 2.0 * static_cast<double>(m * k * n));
  EXPECT_EQ(s.kept, kept);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t col = 0; col < n; ++col)
      ASSERT_EQ(y[static_cast<size_t>(r * n + col)], kept_at(kept, r, col));
  EXPECT_EQ(s.ref[3].bits, x[3].bits);  // x_ref keeps the value the product was computed from
  // One group of one row moves past a zero limit: that row's product follows x there (doubled
  // values, so the delta x3 - x_ref = x is exact in bf16).
  const std::vector<float> none(static_cast<size_t>(k), 0.f);
  std::vector<BFloat16> x3 = x;
  for (int64_t col = 32; col < 64; ++col) {
    BFloat16& v = x3[static_cast<size_t>(40 * k + col)];
    v.bits = f32_to_bf16(2.f * value(v));
  }
  c = gemm_reuse_reference(x3.data(), m, k, w, GemmEpilogue::kNone, s.state(&none, false),
                           y.data());
  EXPECT_EQ(c.groups_reused, m * 3 - 1);
  EXPECT_EQ(c.steps_skipped, 2 * 3 - 1);
  for (int64_t col = 0; col < n; ++col) {
    ASSERT_NEAR(y[static_cast<size_t>(40 * n + col)], dense(x3, wv, bias, k, 40, col), 1e-4);
    ASSERT_EQ(y[static_cast<size_t>(39 * n + col)], kept_at(kept, 39, col));
  }
  for (int64_t col = 32; col < 64; ++col)
    ASSERT_EQ(s.ref[static_cast<size_t>(40 * k + col)].bits,
              x3[static_cast<size_t>(40 * k + col)].bits);
}

struct Case {
  int64_t m, n, k;
  bool f32_input, bf16_output;
  GemmEpilogue epilogue;
  int64_t stride_pad;  // x's row stride is k + stride_pad
};

// x [m, k] copied into rows of stride k + pad (the padding holds values that must not be read
// as part of a row: large ones).
template <typename T>
std::vector<T> strided(const std::vector<T>& x, int64_t m, int64_t k, int64_t pad, T fill) {
  std::vector<T> out(static_cast<size_t>(m * (k + pad)), fill);
  for (int64_t r = 0; r < m; ++r)
    std::copy(x.begin() + r * k, x.begin() + (r + 1) * k, out.begin() + r * (k + pad));
  return out;
}

TEST(AmxReuseGemm, EqualsTheReferenceOverSeveralCallsOnRaggedShapes) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "AMX-BF16 is not usable on this machine (CPU or OS)";
  const Case cases[] = {
      {1, 1, 1, false, false, GemmEpilogue::kNone, 0},
      {33, 40, 70, true, false, GemmEpilogue::kGeluTanh, 3},
      {300, 65, 2100, false, true, GemmEpilogue::kNone, 0},   // 2 row blocks of 256, 2 K chunks
      {64, 96, 4100, true, true, GemmEpilogue::kGeluErf, 0},  // 3 K chunks
      {530, 33, 100, false, false, GemmEpilogue::kGeluTanh, 28},
      {96, 64, 64, false, false, GemmEpilogue::kGeluErf, 0},
  };
  std::mt19937 rng(7);
  const int threads_before = omp_get_max_threads();
  for (const Case& cs : cases) {
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const std::string what = std::to_string(cs.m) + "x" + std::to_string(cs.n) + "x" +
                               std::to_string(cs.k) + " threads " + std::to_string(threads);
      const std::vector<BFloat16> wv =
          random_bf16(static_cast<size_t>(cs.n * cs.k), rng, 1.f / std::sqrt(float(cs.k)));
      std::vector<float> bias(static_cast<size_t>(cs.n));
      for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f - 0.01f * static_cast<float>(i);
      const AmxPackedWeight w(wv.data(), cs.n, cs.k, bias.data());
      const int64_t stride = cs.k + cs.stride_pad;
      const size_t xs = static_cast<size_t>(cs.m * cs.k), ys = static_cast<size_t>(cs.m * cs.n);
      Sim got{std::vector<BFloat16>(xs),
              std::vector<float>(static_cast<size_t>(amx_reuse_kept_elements(cs.m, w))),
              std::vector<float>(static_cast<size_t>(cs.k))};
      Sim want = got;
      std::vector<BFloat16> x = random_bf16(xs, rng);
      std::vector<float> limit;
      for (int call = 0; call < 4; ++call) {
        const bool first = call == 0;
        if (!first) {
          x = next_input(x, cs.m, cs.k, rng);
          limit = limits(want.sumsq, cs.m, 0.5f);
        }
        std::vector<float> want_y(ys), got_y(ys);
        std::vector<BFloat16> got_y16(ys);
        BFloat16 big{};
        big.bits = f32_to_bf16(1e4f);
        const std::vector<BFloat16> xp = strided(x, cs.m, cs.k, cs.stride_pad, big);
        const AmxReuseCounts wc = gemm_reuse_reference(xp.data(), cs.m, stride, w, cs.epilogue,
                                                       want.state(&limit, first), want_y.data());
        AmxReuseOutput out;
        if (cs.bf16_output)
          out.bf16 = got_y16.data();
        else
          out.f32 = got_y.data();
        AmxReuseCounts gc;
        if (cs.f32_input) {  // the same bf16 values as f32: rounded back exactly
          std::vector<float> xf(xp.size());
          for (size_t i = 0; i < xp.size(); ++i) xf[i] = value(xp[i]);
          gc = amx_gemm_bf16_reuse(xf.data(), cs.m, stride, w, cs.epilogue,
                                   got.state(&limit, first), out);
        } else {
          gc = amx_gemm_bf16_reuse(xp.data(), cs.m, stride, w, cs.epilogue,
                                   got.state(&limit, first), out);
        }
        if (cs.bf16_output)
          for (size_t i = 0; i < ys; ++i) got_y[i] = value(got_y16[i]);
        const std::string at = what + " call " + std::to_string(call);
        EXPECT_EQ(gc.groups_reused, wc.groups_reused) << at;
        EXPECT_EQ(gc.steps_skipped, wc.steps_skipped) << at;
        EXPECT_DOUBLE_EQ(gc.flops_skipped, wc.flops_skipped) << at;
        if (!first && cs.m > 32) {
          EXPECT_GT(gc.steps_skipped, 0) << at;
        }
        for (size_t i = 0; i < xs; ++i)
          ASSERT_EQ(got.ref[i].bits, want.ref[i].bits) << at << " " << i;
        EXPECT_EQ(got.sumsq, want.sumsq) << at;
        // The emulation's pass sums in the same order.
        std::vector<float> alone(static_cast<size_t>(cs.k));
        channel_sumsq(x.data(), cs.m, cs.k, alone.data());
        EXPECT_EQ(alone, got.sumsq) << at;
        const double out_tol = cs.bf16_output ? 1e-2 : 1e-4;
        for (size_t i = 0; i < got.kept.size(); ++i)
          ASSERT_NEAR(got.kept[i], want.kept[i], 1e-4 * (1 + std::fabs(want.kept[i])))
              << at << " kept " << i;
        for (size_t i = 0; i < ys; ++i)
          ASSERT_NEAR(got_y[i], want_y[i], out_tol * (1 + std::fabs(want_y[i])))
              << at << " y " << i;
        // Keep the two states identical so the next call's decisions can be compared exactly.
        want.kept = got.kept;
      }
    }
  }
  omp_set_num_threads(threads_before);
}

TEST(AmxReuseGemm, FirstCallIsTheDenseKernelBitForBit) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "AMX-BF16 is not usable on this machine (CPU or OS)";
  std::mt19937 rng(3);
  for (const auto& [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{77, 70, 3000}, {300, 130, 96}}) {
    const std::vector<BFloat16> wv = random_bf16(static_cast<size_t>(n * k), rng, 0.05f);
    std::vector<float> bias(static_cast<size_t>(n));
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.02f * static_cast<float>(i) - 0.5f;
    const AmxPackedWeight w(wv.data(), n, k, bias.data());
    const std::vector<BFloat16> x = random_bf16(static_cast<size_t>(m * k), rng);
    std::vector<float> xf(x.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = value(x[i]);
    for (const GemmEpilogue ep :
         {GemmEpilogue::kNone, GemmEpilogue::kGeluTanh, GemmEpilogue::kGeluErf}) {
      std::vector<float> dense_y(static_cast<size_t>(m * n)), y(dense_y.size());
      amx_gemm_bf16(x.data(), m, k, w, dense_y.data(), ep);
      Sim s{std::vector<BFloat16>(x.size()),
            std::vector<float>(static_cast<size_t>(amx_reuse_kept_elements(m, w))),
            std::vector<float>(static_cast<size_t>(k))};
      AmxReuseOutput out;
      out.f32 = y.data();
      amx_gemm_bf16_reuse(x.data(), m, k, w, ep, s.state(nullptr, true), out);
      EXPECT_EQ(y, dense_y) << m << "x" << n << "x" << k;
      std::vector<BFloat16> dense16(dense_y.size()), y16(dense_y.size());
      amx_gemm_bf16(x.data(), m, k, w, dense16.data(), ep);
      out = AmxReuseOutput{};
      out.bf16 = y16.data();
      amx_gemm_bf16_reuse(x.data(), m, k, w, ep, s.state(nullptr, true), out);
      for (size_t i = 0; i < y16.size(); ++i) ASSERT_EQ(y16[i].bits, dense16[i].bits) << i;
      out = AmxReuseOutput{};  // f32 activations, rounded while they are read
      out.f32 = y.data();
      amx_gemm_bf16_reuse(xf.data(), m, k, w, ep, s.state(nullptr, true), out);
      EXPECT_EQ(y, dense_y) << "f32 input " << m << "x" << n << "x" << k;
    }
  }
}

}  // namespace
}  // namespace vidax
