// Token-subset forwards (DitSample::tokens with the key/value store, what HSA runs on): with a
// fresh store (the previous whole forward saw the same input) a subset's rows equal the whole
// forward's, in fp32 and bf16, for scalar and per-token timesteps; rows outside the subset are
// zero; stale rows of the store change the result; misuse is refused.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "models/wan/dit.h"
#include "models/wan/dit_random.h"
#include "nn/patchify.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

DitConfig small_config(DitKind kind = DitKind::kT2V) {
  DitConfig c;
  c.kind = kind;
  c.dim = 128, c.num_heads = 2, c.ffn_dim = 192, c.num_layers = 2, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16;
  return c;
}

DitSample sample(const Tensor& x, int branch) {
  DitSample s;
  s.x = x;
  s.context = vidax::testing::random_tensor(Shape{5, 16}, 10 + branch);
  s.t = Tensor::from_floats(std::vector<float>{700.0f}, Shape{1});
  s.cfg_branch = branch;
  return s;
}

// [C, F, H, W] -> [L, C * pv] patch rows, to compare per token.
Tensor tokens_of(const Tensor& out, const DitConfig& c) { return patchify(out, c.patch); }

TEST(WanDitSubset, AFreshStoreGivesTheWholeForwardsRows) {
  for (Precision p : {Precision::kFP32, Precision::kBF16}) {
    const DitConfig c = small_config();
    WanDit dit(c, random_dit_weights(c, DType::kF32, 3), p);
    dit.set_kv_store(true);
    const Tensor x = vidax::testing::random_tensor(Shape{16, 3, 4, 6}, 1);  // 3 x 2 x 3 tokens
    for (int branch : {0, 1}) {
      DitSample s = sample(x, branch);
      const Tensor whole = tokens_of(dit.forward(s), c);  // fills the store
      // Ragged subsets: single tokens, stretches, the ends of the sequence.
      for (const std::vector<int64_t>& subset : std::vector<std::vector<int64_t>>{
               {0}, {17}, {1, 2, 3, 9, 10, 17}, {0, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17}}) {
        s.tokens = &subset;
        const Tensor part = tokens_of(dit.forward(s), c);
        const double tol = p == Precision::kFP32 ? 1e-5 : 2e-2;
        for (int64_t t = 0; t < whole.dim(0); ++t) {
          const bool in = std::find(subset.begin(), subset.end(), t) != subset.end();
          const Tensor got = part.slice(0, t, t + 1);
          if (in) {
            EXPECT_TRUE(vidax::testing::all_close(got, whole.slice(0, t, t + 1), tol, tol,
                                                  "token " + std::to_string(t)));
          } else {
            EXPECT_TRUE(vidax::testing::all_close(got, Tensor::zeros(got.shape()), 0, 0,
                                                  "outside token " + std::to_string(t)));
          }
        }
        s.tokens = nullptr;
      }
    }
  }
}

TEST(WanDitSubset, PerTokenTimestepsKeepTheirRuns) {
  // Wan 2.2 form: frame 0's tokens at t = 0, the rest at 700; a subset across both runs.
  DitConfig c = small_config(DitKind::kTI2V);
  WanDit dit(c, random_dit_weights(c, DType::kF32, 5), Precision::kFP32);
  dit.set_kv_store(true);
  const Tensor x = vidax::testing::random_tensor(Shape{16, 3, 4, 6}, 2);
  DitSample s = sample(x, 0);
  std::vector<float> t(18, 700.0f);
  for (int i = 0; i < 6; ++i) t[static_cast<size_t>(i)] = 0.0f;
  s.t = Tensor::from_floats(t, Shape{18});
  const Tensor whole = tokens_of(dit.forward(s), c);
  const std::vector<int64_t> subset = {4, 5, 6, 7, 11};
  s.tokens = &subset;
  const Tensor part = tokens_of(dit.forward(s), c);
  for (int64_t tok : subset)
    EXPECT_TRUE(vidax::testing::all_close(part.slice(0, tok, tok + 1), whole.slice(0, tok, tok + 1),
                                          1e-5, 1e-5, "token " + std::to_string(tok)));
}

TEST(WanDitSubset, StaleRowsOfTheStoreAreWhatTheOthersAttendTo) {
  const DitConfig c = small_config();
  WanDit dit(c, random_dit_weights(c, DType::kF32, 3), Precision::kFP32);
  dit.set_kv_store(true);
  const Tensor x1 = vidax::testing::random_tensor(Shape{16, 3, 4, 6}, 1);
  const Tensor x2 = vidax::testing::random_tensor(Shape{16, 3, 4, 6}, 7);
  DitSample s = sample(x1, 0);
  dit.forward(s);  // the store holds x1's keys and values
  s.x = x2;
  const Tensor fresh = tokens_of(dit.forward(s), c);  // now x2's
  s.x = x1;
  dit.forward(s);  // back to x1's
  s.x = x2;
  const std::vector<int64_t> subset = {3, 4};
  s.tokens = &subset;
  const Tensor stale = tokens_of(dit.forward(s), c);
  // Tokens 3 and 4 see x1's other rows: not x2's whole-forward result.
  EXPECT_FALSE(vidax::testing::all_close(stale.slice(0, 3, 5), fresh.slice(0, 3, 5), 1e-3, 1e-3,
                                         "stale vs fresh"));
}

TEST(WanDitSubset, MisuseIsRefused) {
  const DitConfig c = small_config();
  WanDit dit(c, random_dit_weights(c, DType::kF32, 3), Precision::kFP32);
  const Tensor x = vidax::testing::random_tensor(Shape{16, 3, 4, 6}, 1);
  DitSample s = sample(x, 0);
  const std::vector<int64_t> subset = {1, 2};
  s.tokens = &subset;
  EXPECT_THROW(dit.forward(s), InputError);  // no store
  dit.set_kv_store(true);
  EXPECT_THROW(dit.forward(s), InputError);  // the store was never filled
  s.tokens = nullptr;
  dit.forward(s);
  for (const std::vector<int64_t>& bad :
       std::vector<std::vector<int64_t>>{{}, {2, 1}, {1, 1}, {18}, {-1}}) {
    s.tokens = &bad;
    EXPECT_THROW(dit.forward(s), InputError);
  }
  s.tokens = &subset;
  s.cfg_branch = 1;  // the other branch's store is empty
  EXPECT_THROW(dit.forward(s), InputError);
}

}  // namespace
}  // namespace vidax::wan
