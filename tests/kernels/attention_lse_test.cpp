// The flash kernels' log-sum-exp output (AttentionDims::lse) against a double-precision
// reference, for f32 and every bf16 kernel this machine has, with padding and a repeated last
// key; and the ring merge: attention over two key chunks merged by their log-sum-exp equals the
// scalar reference over all keys.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/attention_lse.h"
#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/flash_attention.h"
#include "support/test_support.h"

namespace vidax {
namespace {

struct Lse {
  int64_t q_len, kv_len, kv_valid, heads, hd, repeat;
};

// ln(sum_j w_j e^(scale q.k_j)) in double, w = repeat for the last valid key.
std::vector<double> reference_lse(const std::vector<float>& q, const std::vector<float>& k,
                                  const Lse& c, float scale) {
  std::vector<double> out(static_cast<size_t>(c.q_len * c.heads));
  const int64_t row = c.heads * c.hd;
  for (int64_t i = 0; i < c.q_len; ++i)
    for (int64_t h = 0; h < c.heads; ++h) {
      std::vector<double> s(static_cast<size_t>(c.kv_valid));
      double m = -1e300;
      for (int64_t j = 0; j < c.kv_valid; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < c.hd; ++d)
          dot += static_cast<double>(q[static_cast<size_t>(i * row + h * c.hd + d)]) *
                 k[static_cast<size_t>(j * row + h * c.hd + d)];
        s[static_cast<size_t>(j)] = dot * scale;
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      double l = 0;
      for (int64_t j = 0; j < c.kv_valid; ++j)
        l += (j == c.kv_valid - 1 ? static_cast<double>(c.repeat) : 1.0) *
             std::exp(s[static_cast<size_t>(j)] - m);
      out[static_cast<size_t>(i * c.heads + h)] = m + std::log(l);
    }
  return out;
}

std::vector<float> bf16_round(std::vector<float> v) {
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}
std::vector<BFloat16> to_bf16(const std::vector<float>& v) {
  std::vector<BFloat16> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i].bits = f32_to_bf16(v[i]);
  return b;
}

TEST(AttentionLse, FlashKernelsReturnTheLogSumExp) {
  uint32_t seed = 1;
  for (const Lse& c : {Lse{1, 1, 1, 1, 8, 1}, Lse{17, 40, 33, 3, 64, 1},
                       Lse{70, 130, 130, 2, 128, 1}, Lse{33, 20, 9, 2, 32, 7}}) {
    const int64_t row = c.heads * c.hd;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    const auto q = bf16_round(
        vidax::testing::random_floats(static_cast<size_t>(c.q_len * row), seed++, -2, 2));
    const auto k = bf16_round(
        vidax::testing::random_floats(static_cast<size_t>(c.kv_len * row), seed++, -2, 2));
    const auto v =
        bf16_round(vidax::testing::random_floats(static_cast<size_t>(c.kv_len * row), seed++));
    const auto ref = reference_lse(q, k, c, scale);
    AttentionDims d{};
    d.q_len = c.q_len;
    d.kv_len = c.kv_len;
    d.kv_valid = c.kv_valid;
    d.heads = c.heads;
    d.head_dim = c.hd;
    d.q_stride = d.k_stride = d.v_stride = d.out_stride = row;
    d.scale = scale;
    d.kv_last_repeat = c.repeat;
    std::vector<float> out(static_cast<size_t>(c.q_len * row)), lse(ref.size(), 0.0f);
    d.lse = lse.data();
    flash_attention(q.data(), k.data(), v.data(), out.data(), d);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(lse[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << "f32 " << i;
    const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
    for (AttentionBf16Kernel kernel :
         {AttentionBf16Kernel::kWidened, AttentionBf16Kernel::kAvx512Bf16,
          AttentionBf16Kernel::kAmx}) {
      if (!flash_attention_bf16_available(kernel)) continue;
      std::fill(lse.begin(), lse.end(), 0.0f);
      flash_attention_bf16(kernel, qb.data(), kb.data(), vb.data(), out.data(), d);
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(lse[i], ref[i], 1e-3 * (1 + std::fabs(ref[i])))
            << "bf16 kernel " << static_cast<int>(kernel) << " row " << i;
    }
  }
}

TEST(AttentionLse, MergingTwoKeyChunksEqualsAttentionOverAllKeys) {
  const int64_t q_len = 29, kv = 61, split = 25, heads = 2, hd = 64, row = heads * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto q = vidax::testing::random_floats(q_len * row, 5, -2, 2);
  const auto k = vidax::testing::random_floats(kv * row, 6, -2, 2);
  const auto v = vidax::testing::random_floats(kv * row, 7);
  AttentionDims d{};
  d.q_len = q_len;
  d.heads = heads;
  d.head_dim = hd;
  d.q_stride = d.k_stride = d.v_stride = d.out_stride = row;
  d.scale = scale;
  std::vector<float> all(q_len * row), a(q_len * row), b(q_len * row);
  std::vector<float> la(q_len * heads), lb(q_len * heads);
  d.kv_len = d.kv_valid = kv;
  attention_reference(q.data(), k.data(), v.data(), all.data(), d);  // all keys, in double
  d.kv_len = d.kv_valid = split;
  d.lse = la.data();
  flash_attention(q.data(), k.data(), v.data(), a.data(), d);
  d.kv_len = d.kv_valid = kv - split;
  d.lse = lb.data();
  flash_attention(q.data(), k.data() + split * row, v.data() + split * row, b.data(), d);
  merge_attention_partial(a.data(), la.data(), b.data(), lb.data(), q_len, heads, hd, row, row);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_NEAR(a[i], all[i], 1e-5) << i;
}

}  // namespace
}  // namespace vidax
