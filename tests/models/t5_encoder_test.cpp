// umT5 encoder parity with the official T5Encoder (fixture t5_tiny): every captured
// intermediate, the relative-position buckets exactly, all output rows, and the trimmed context;
// plus the bucket formula at real lengths, the bf16 path, and input errors.
#include <map>

#include "io/safetensors.h"
#include "kernels/cpu/gemm.h"
#include "models/wan/t5_attention.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/t5_random.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::all_close;

constexpr double kTol = 1e-5;  // fixtures README: 1e-5 + 1e-5 |ref| for T5 tensors

T5Encoder load_tiny(const std::string& path, Precision p) {
  const T5Checkpoint ck = T5Checkpoint::open(path);
  ck.require_loadable();
  return T5Encoder(ck.config(), ck.loader(), p);
}

TEST(T5Encoder, MatchesOfficialEncoderOnEveryCapturedTensor) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "t5_tiny.io.safetensors");
  const auto io = SafetensorsFile::open(io_path);
  const T5Checkpoint ck = T5Checkpoint::open(weights);
  EXPECT_EQ(ck.config_source(), "file metadata");
  EXPECT_EQ(ck.config().num_heads, 4);
  EXPECT_EQ(ck.config().num_layers, 2);
  T5Encoder enc(ck.config(), ck.loader(), Precision::kFP32);

  std::map<std::string, Tensor> got;
  const Tensor out = enc.forward(io.tensor("ids"), io.tensor("mask"),
                                 [&](const std::string& n, const Tensor& t) { got[n] = t; });
  ASSERT_EQ(out.shape(), (Shape{12, 32}));
  int compared = 0;
  for (const auto& e : io.entries()) {
    if (e.name == "ids" || e.name == "mask" || e.name == "context") continue;
    ASSERT_TRUE(got.count(e.name)) << "no capture named " << e.name;
    const Tensor ref = io.tensor(e.name);
    if (e.name == "rel_buckets") {
      ASSERT_EQ(got[e.name].shape(), ref.shape());
      for (int64_t i = 0; i < ref.numel(); ++i)
        ASSERT_EQ(got[e.name].data<int64_t>()[i], ref.data<int64_t>()[i]) << "bucket " << i;
    } else {
      EXPECT_TRUE(all_close(got[e.name], ref, kTol, kTol, e.name));
    }
    ++compared;
  }
  EXPECT_EQ(compared, 11);  // rel_buckets, embed, 2 x (pos_bias, attn_out, ffn_out, out), out
  EXPECT_TRUE(all_close(out.reshape(Shape{1, 12, 32}), io.tensor("out"), kTol, kTol, "out"));
}

TEST(T5Encoder, EncodeOnRealTokensEqualsContextAndForwardRows) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "t5_tiny.io.safetensors");
  const auto io = SafetensorsFile::open(io_path);
  T5Encoder enc = load_tiny(weights, Precision::kFP32);
  TokenizedText text;
  text.ids = io.tensor("ids").reshape(Shape{12});
  text.mask = io.tensor("mask").reshape(Shape{12});
  text.count = 9;
  const Tensor context = enc.encode(text);
  ASSERT_EQ(context.shape(), (Shape{9, 32}));
  EXPECT_TRUE(all_close(context, io.tensor("context"), kTol, kTol, "context"));
  // The trimmed run equals the first rows of the padded run (not bit-exact: different lengths
  // give different GEMM blockings).
  const Tensor full = enc.forward(text.ids, text.mask);
  EXPECT_TRUE(all_close(context, full.slice(0, 0, 9), 1e-6, 1e-6, "trimmed vs padded"));
}

TEST(T5Encoder, BatchMatchesOfficialEncoderOnPaddedPrompts) {
  // tests/data/t5_batch: the official T5Encoder on three prompts of 9, 4 and 12 tokens padded
  // to 12, in one call.
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  const auto io = SafetensorsFile::open(std::string(VIDAX_SOURCE_DIR) +
                                        "/tests/data/t5_batch/t5_batch.io.safetensors");
  T5Encoder enc = load_tiny(weights, Precision::kFP32);
  std::map<std::string, Tensor> got;
  const Tensor out = enc.forward_batch(io.tensor("ids"), io.tensor("mask"),
                                       [&](const std::string& n, const Tensor& t) { got[n] = t; });
  ASSERT_EQ(out.shape(), (Shape{3, 12, 32}));
  EXPECT_TRUE(all_close(out, io.tensor("out"), kTol, kTol, "out"));
  // Captures are stacked on the batch; the buckets come once.
  EXPECT_EQ(got.at("rel_buckets").shape(), (Shape{12, 12}));
  EXPECT_EQ(got.at("block1.pos_bias").shape(), (Shape{3, 4, 12, 12}));
  EXPECT_TRUE(all_close(got.at("out"), io.tensor("out"), kTol, kTol, "captured out"));
  // Each prompt's context from its own real tokens (encode_batch) equals the reference's.
  std::vector<TokenizedText> texts;
  for (int64_t b = 0; b < 3; ++b) {
    TokenizedText t;
    t.ids = io.tensor("ids").select(0, b).contiguous();
    t.mask = io.tensor("mask").select(0, b).contiguous();
    for (int64_t i = 0; i < 12; ++i) t.count += t.mask.data<int64_t>()[i];
    texts.push_back(t);
  }
  const std::vector<Tensor> contexts = enc.encode_batch(texts);
  ASSERT_EQ(contexts.size(), 3u);
  for (int64_t b = 0; b < 3; ++b) {
    const std::string name = "context." + std::to_string(b);
    EXPECT_TRUE(all_close(contexts[static_cast<size_t>(b)], io.tensor(name), kTol, kTol, name));
  }
  EXPECT_EQ(contexts[1].shape(), (Shape{4, 32}));
}

TEST(T5Encoder, BatchRejectsMismatchedShapesAndNamesThePrompt) {
  T5Config c;
  c.vocab = 50, c.dim = 16, c.dim_attn = 16, c.dim_ffn = 32, c.num_heads = 2, c.num_layers = 1;
  T5Encoder enc(c, random_t5_weights(c, DType::kF32, 3), Precision::kFP32);
  Tensor ids = Tensor::zeros(Shape{2, 3}, DType::kI64),
         mask = Tensor::zeros(Shape{2, 3}, DType::kI64);
  for (int64_t i = 0; i < 6; ++i) mask.mutable_data<int64_t>()[i] = 1;
  EXPECT_EQ(enc.forward_batch(ids, mask).shape(), (Shape{2, 3, 16}));
  EXPECT_THROW(enc.forward_batch(ids, Tensor::zeros(Shape{2, 4}, DType::kI64)), InputError);
  EXPECT_THROW(enc.forward_batch(ids.reshape(Shape{6}), mask.reshape(Shape{6})), InputError);
  for (int64_t i = 3; i < 6; ++i) mask.mutable_data<int64_t>()[i] = 0;  // prompt 1: no token
  try {
    enc.forward_batch(ids, mask);
    ADD_FAILURE() << "expected an error for prompt 1";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("prompt 1 of 2"), std::string::npos) << e.what();
  }
}

TEST(T5Encoder, Bf16PathStaysCloseToReference) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "t5_tiny.io.safetensors");
  const auto io = SafetensorsFile::open(io_path);
  T5Encoder enc = load_tiny(weights, Precision::kBF16);
  const Tensor out = enc.forward(io.tensor("ids"), io.tensor("mask"));
  // bf16 GEMM inputs/weights round at 2^-9 relative; through 2 blocks and the final norm the
  // outputs (O(1)) move by ~1e-2. A wrong layer would be off by O(1).
  EXPECT_TRUE(all_close(out.reshape(Shape{1, 12, 32}), io.tensor("out"), 5e-2, 5e-2, "bf16 out"));
  EXPECT_FALSE(all_close(out.reshape(Shape{1, 12, 32}), io.tensor("out"), 1e-6, 1e-6, "exact"))
      << "bf16 path gave f32-exact results: is it really running in bf16?";
}

TEST(T5Encoder, RelativeBucketsMatchTorchAtRealLengths) {
  // Boundaries of torch's float32 formula for 32 buckets, max_dist 128 (computed once with
  // torch 1.13: `8 + (torch.log(d.float() / 8) / math.log(16) * 8).long()` clamped to 15): the
  // bucket first reaches 8..15 at |rel| = 8, 12, 16, 23, 32, 46, 64, 91.
  const int64_t first[] = {8, 12, 16, 23, 32, 46, 64, 91};
  for (int64_t d = 0; d < 1100; ++d) {
    int64_t expected = d;
    if (d >= 8) {
      expected = 8;
      for (int k = 1; k < 8; ++k)
        if (d >= first[k]) expected = 8 + k;
    }
    EXPECT_EQ(t5_relative_bucket(-d, 32), expected) << "rel " << -d;
    if (d > 0) {
      EXPECT_EQ(t5_relative_bucket(d, 32), 16 + expected) << "rel " << d;
    }
  }
  EXPECT_EQ(t5_relative_bucket(0, 32), 0);
}

TEST(T5Encoder, RejectsBadIdsAndMasks) {
  T5Config c;
  c.vocab = 50, c.dim = 16, c.dim_attn = 16, c.dim_ffn = 32, c.num_heads = 2, c.num_layers = 1;
  T5Encoder enc(c, random_t5_weights(c, DType::kF32, 3), Precision::kFP32);
  auto ids = [](std::vector<int64_t> v) {
    Tensor t = Tensor::zeros(Shape{static_cast<int64_t>(v.size())}, DType::kI64);
    std::copy(v.begin(), v.end(), t.mutable_data<int64_t>());
    return t;
  };
  auto expect_error = [&](const Tensor& i, const Tensor& m, const std::string& needle) {
    try {
      enc.forward(i, m);
      ADD_FAILURE() << "expected InputError mentioning " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(ids({1, 50, 2}), ids({1, 1, 1}), "outside the vocabulary");
  expect_error(ids({1, -1, 2}), ids({1, 1, 1}), "outside the vocabulary");
  expect_error(ids({1, 2, 3}), ids({1, 1}), "mask");
  expect_error(ids({1, 2, 3}), ids({0, 0, 0}), "no real token");
  expect_error(ids({1, 2, 3}), ids({1, 2, 0}), "expected 0 or 1");
  expect_error(Tensor::zeros(Shape{3}, DType::kF32), ids({1, 1, 1}), "ids");
  expect_error(Tensor::zeros(Shape{2, 3}, DType::kI64), ids({1, 1, 1}), "[L] or [1, L]");
  // A valid call works and accepts [1, L].
  EXPECT_EQ(enc.forward(ids({4, 5, 1}).reshape(Shape{1, 3}), ids({1, 1, 1})).shape(),
            (Shape{3, 16}));
}

TEST(T5Encoder, MaskedKeysDoNotInfluenceRealRows) {
  // A scattered mask (not just trailing padding): changing a masked token's id must not change
  // the rows of real tokens.
  T5Config c;
  c.vocab = 64, c.dim = 32, c.dim_attn = 32, c.dim_ffn = 48, c.num_heads = 4, c.num_layers = 2;
  T5Encoder enc(c, random_t5_weights(c, DType::kF32, 11), Precision::kFP32);
  Tensor a = Tensor::zeros(Shape{6}, DType::kI64), b = Tensor::zeros(Shape{6}, DType::kI64);
  Tensor mask = Tensor::zeros(Shape{6}, DType::kI64);
  const int64_t ia[] = {5, 9, 13, 17, 21, 1}, ib[] = {5, 9, 40, 17, 22, 1},
                m[] = {1, 1, 0, 1, 0, 1};
  std::copy(ia, ia + 6, a.mutable_data<int64_t>());
  std::copy(ib, ib + 6, b.mutable_data<int64_t>());
  std::copy(m, m + 6, mask.mutable_data<int64_t>());
  const Tensor oa = enc.forward(a, mask), ob = enc.forward(b, mask);
  for (int64_t row : {0, 1, 3, 5})
    EXPECT_TRUE(all_close(oa.slice(0, row, row + 1), ob.slice(0, row, row + 1), 0, 0,
                          "row " + std::to_string(row)));
  EXPECT_FALSE(all_close(oa.slice(0, 2, 3), ob.slice(0, 2, 3), 1e-3, 0, "masked row 2"));
}

TEST(T5Encoder, MemoryEstimatesCoverWhatIsHeld) {
  T5Config c;
  c.vocab = 300, c.dim = 64, c.dim_attn = 64, c.dim_ffn = 96, c.num_heads = 4, c.num_layers = 2;
  for (Precision p : {Precision::kFP32, Precision::kBF16}) {
    T5Encoder enc(c, random_t5_weights(c, DType::kF32, 1), p);
    EXPECT_LE(static_cast<int64_t>(enc.held_weight_bytes()),
              T5Encoder::weight_bytes(c, p) * 5 / 4);  // packing may pad a little
    EXPECT_GE(static_cast<int64_t>(enc.held_weight_bytes()), T5Encoder::weight_bytes(c, p) / 2);
  }
  const T5Config xxl = *t5_preset("umt5-xxl");
  // umT5-XXL encoder: 5.68e9 parameters (4.63e9 in the blocks, 1.05e9 embedding); the blocks'
  // GEMM weights take 2 bytes each; where bf16 GEMMs run widened (no AMX, gemm.h) one f32
  // scratch of the largest matrix (a 10240 x 4096 FFN input) is added.
  EXPECT_EQ(gemm_weight_item_bytes(DType::kBF16), 2);
  const double scratch = gemm_widens_bf16() ? 4.0 * 10240 * 4096 : 0.0;
  EXPECT_NEAR(static_cast<double>(T5Encoder::weight_bytes(xxl, Precision::kBF16)),
              2 * 4.63e9 + 2 * 1.05e9 + scratch, 0.02e9 * 2);
  EXPECT_GT(T5Encoder::activation_bytes(xxl, 512), T5Encoder::activation_bytes(xxl, 32));
}

}  // namespace
}  // namespace vidax::wan
