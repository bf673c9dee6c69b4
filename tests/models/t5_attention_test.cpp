// The umT5 attention routine (additive relative-position bias, key mask, no scaling) against its
// double-precision scalar reference.
#include <vector>

#include "models/wan/t5_attention.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::random_floats;

// |out - ref| <= atol + 1e-5 |ref| elementwise.
void check(int64_t L, int64_t heads, int64_t hd, const std::vector<uint8_t>& mask, float scale,
           uint32_t seed, double atol = 1e-6) {
  const int64_t row = heads * hd, qkv_stride = 3 * row + 5;  // padded rows: strides honoured
  const auto qkv = random_floats(static_cast<size_t>(L * qkv_stride), seed, -scale, scale);
  const auto bias = random_floats(static_cast<size_t>(heads * (2 * L - 1)), seed + 1, -2, 2);
  const T5AttentionDims d{L, heads, hd, qkv_stride, qkv_stride, qkv_stride, row};
  std::vector<float> out(static_cast<size_t>(L * row)), ref(out.size());
  const uint8_t* m = mask.empty() ? nullptr : mask.data();
  t5_attention(qkv.data(), qkv.data() + row, qkv.data() + 2 * row, out.data(), bias.data(), m, d);
  t5_attention_reference(qkv.data(), qkv.data() + row, qkv.data() + 2 * row, ref.data(),
                         bias.data(), m, d);
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(out[i]) - ref[i]) /
                                (atol + 1e-5 * std::abs(static_cast<double>(ref[i]))));
  EXPECT_LE(worst, 1.0) << "L=" << L << " heads=" << heads << " hd=" << hd;
}

TEST(T5Attention, MatchesScalarReference) {
  check(1, 1, 1, {}, 1.0f, 1);
  check(7, 3, 5, {}, 1.0f, 2);
  check(33, 4, 64, {}, 0.5f, 3);
  // Large unscaled logits (T5 has no 1/sqrt(d)): softmax must stay stable. Logits reach ~100
  // here, so their f32 rounding alone (~1e-5 absolute) moves probabilities by ~1e-5 relative
  // and outputs (|v| <= 3) by ~3e-5: the tolerance follows that conditioning.
  check(20, 2, 64, {}, 3.0f, 4, 1e-4);
}

TEST(T5Attention, MaskedKeysAreExcluded) {
  std::vector<uint8_t> mask(17, 1);
  mask[0] = mask[5] = mask[16] = 0;
  check(17, 3, 8, mask, 1.0f, 5);
  std::vector<uint8_t> one(9, 0);
  one[4] = 1;  // a single real key: every row is exactly that value vector
  check(9, 2, 4, one, 1.0f, 6);
}

TEST(T5Attention, RejectsInconsistentInput) {
  std::vector<float> buf(64, 0.0f);
  std::vector<uint8_t> none(2, 0);
  const T5AttentionDims ok{2, 1, 4, 4, 4, 4, 4};
  EXPECT_THROW(
      t5_attention(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), none.data(), ok),
      InputError);
  T5AttentionDims bad = ok;
  bad.q_stride = 3;
  EXPECT_THROW(
      t5_attention(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), nullptr, bad),
      InputError);
  bad = ok;
  bad.tokens = 0;
  EXPECT_THROW(
      t5_attention(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), nullptr, bad),
      InputError);
}

}  // namespace
}  // namespace vidax::wan
