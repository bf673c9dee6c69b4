// The cross-attention key/value cache: a model that sees contexts A, B, A, C, B (two entries,
// least recently used replaced) gives, bit for bit, what a fresh model gives for each, in fp32
// and bf16, for t2v and i2v (the image features are part of the key).
#include <gtest/gtest.h>

#include <vector>

#include "models/wan/dit.h"
#include "models/wan/dit_random.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

DitSample sample(const Tensor& context, const Tensor& clip, bool i2v) {
  DitSample s;
  s.x = vidax::testing::random_tensor(Shape{16, 2, 4, 6}, 1);
  if (i2v) {
    s.y = vidax::testing::random_tensor(Shape{20, 2, 4, 6}, 2);
    s.clip_fea = clip;
  }
  s.context = context;
  s.t = Tensor::from_floats(std::vector<float>{600.0f}, Shape{1});
  return s;
}

TEST(WanDitCrossKvCache, RepeatedAndAlternatingContextsGiveFreshResults) {
  for (bool i2v : {false, true}) {
    DitConfig c;
    c.kind = i2v ? DitKind::kI2V : DitKind::kT2V;
    c.dim = 128, c.num_heads = 2, c.ffn_dim = 128, c.num_layers = 2, c.text_len = 8;
    c.text_dim = 16, c.freq_dim = 16, c.in_dim = i2v ? 36 : 16, c.clip_dim = 32;
    const auto weights = random_dit_weights(c, DType::kF32, 4);
    const Tensor a = vidax::testing::random_tensor(Shape{3, 16}, 10);
    const Tensor b = vidax::testing::random_tensor(Shape{5, 16}, 11);
    const Tensor cc = vidax::testing::random_tensor(Shape{3, 16}, 12);  // same shape as a
    const Tensor clip1 = vidax::testing::random_tensor(Shape{1, 7, 32}, 13);
    const Tensor clip2 = vidax::testing::random_tensor(Shape{1, 7, 32}, 14);
    struct Call {
      const Tensor* context;
      const Tensor* clip;
    };
    // A, B, A (hit), C (replaces B), B (recomputed), A with other image features (i2v: a miss).
    const std::vector<Call> calls = {{&a, &clip1},  {&b, &clip1}, {&a, &clip1},
                                     {&cc, &clip1}, {&b, &clip1}, {&a, &clip2}};
    for (Precision p : {Precision::kFP32, Precision::kBF16}) {
      WanDit cached(c, weights, p);
      for (size_t i = 0; i < calls.size(); ++i) {
        const DitSample s = sample(*calls[i].context, *calls[i].clip, i2v);
        WanDit fresh(c, weights, p);
        const auto want = fresh.forward(s).to_float_vector();
        const auto got = cached.forward(s).to_float_vector();
        ASSERT_EQ(got, want) << "call " << i << (i2v ? " i2v" : " t2v")
                             << (p == Precision::kBF16 ? " bf16" : " fp32");
      }
    }
  }
}

}  // namespace
}  // namespace vidax::wan
