// vidax-tiny parity: the committed model (models/vidax-tiny) loaded through the same loaders as
// real Wan checkpoints must reproduce the training code's own fp32 forward passes
// (tests/data/vidax_tiny_parity.safetensors, written by research/vidax_tiny/parity.py from the
// exported files) at the fixture tolerances, and the shipped tokenizer must give the ids the
// training used.
#include <filesystem>

#include "io/safetensors.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/tokenizer.h"
#include "models/wan/vae.h"
#include "models/wan/vae_checkpoint.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

namespace fs = std::filesystem;
using vidax::testing::all_close;

const std::string kModel = std::string(VIDAX_SOURCE_DIR) + "/models/vidax-tiny";
const std::string kParity =
    std::string(VIDAX_SOURCE_DIR) + "/tests/data/vidax_tiny_parity.safetensors";
// The caption parity.py tokenised (an input, not a result).
const std::string kPrompt = "a red square moves to the left on a dark blue background";

TEST(VidaxTiny, FilesFitTheSizeBudget) {
  // Issue 4: weights and tokenizer together at most 40 MB.
  uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(kModel))
    if (e.is_regular_file()) bytes += e.file_size();
  EXPECT_GT(bytes, 0u);
  EXPECT_LE(bytes, 40u * 1000 * 1000);
}

TEST(VidaxTiny, TokenizerGivesTheTrainingIds) {
  auto io = SafetensorsFile::open(kParity);
  const Tensor want = io.tensor("ids").contiguous();  // [1, 40]
  const Tensor want_mask = io.tensor("mask").contiguous();
  auto tok = Tokenizer::open(kModel + "/google/umt5-xxl/spiece.model");
  const TokenizedText got = tok.encode(kPrompt, want.shape()[1]);
  ASSERT_EQ(got.ids.numel(), want.numel());
  const auto* g = got.ids.contiguous().data<int64_t>();
  const auto* gm = got.mask.contiguous().data<int64_t>();
  for (int64_t i = 0; i < want.numel(); ++i) {
    EXPECT_EQ(g[i], want.data<int64_t>()[i]) << "token " << i;
    EXPECT_EQ(gm[i], want_mask.data<int64_t>()[i]) << "mask " << i;
  }
  // The unconditional branch was trained on the empty prompt: just </s>.
  const TokenizedText empty = tok.encode("", 8);
  EXPECT_EQ(empty.count, 1);
  EXPECT_EQ(empty.ids.contiguous().data<int64_t>()[0], 1);
}

TEST(VidaxTiny, T5MatchesTrainingCode) {
  auto io = SafetensorsFile::open(kParity);
  auto ck = T5Checkpoint::open(kModel + "/models_t5_umt5-xxl-enc-bf16.pth");
  ck.require_loadable();
  T5Encoder t5(ck.config(), ck.loader(), Precision::kFP32);
  const Tensor out = t5.forward(io.tensor("ids"), io.tensor("mask"));  // [40, 64]
  const Tensor want = io.tensor("t5_out");                             // [1, 40, 64]
  EXPECT_TRUE(all_close(out.reshape(want.shape()), want, 1e-5, 1e-5, "t5_out"));
}

TEST(VidaxTiny, DitMatchesTrainingCode) {
  auto io = SafetensorsFile::open(kParity);
  auto ck = DitCheckpoint::open(kModel);
  ck.require_loadable();
  EXPECT_EQ(ck.config().text_len, 512);
  WanDit dit(
      ck.config(), [&](const std::string& n) { return ck.get(n); }, Precision::kFP32);
  DitSample s;
  s.x = io.tensor("x");
  s.t = io.tensor("t");
  s.context = io.tensor("context");
  s.seq_len = io.tensor("seq_len").contiguous().data<int64_t>()[0];
  const Tensor out = dit.forward(s);
  // The trained output is O(1): the fixture tolerance applies unchanged.
  EXPECT_TRUE(all_close(out, io.tensor("out"), 1e-4, 1e-4, "out"));
}

TEST(VidaxTiny, VaeDecodeMatchesTrainingCode) {
  auto io = SafetensorsFile::open(kParity);
  auto ck = VaeCheckpoint::open(kModel + "/Wan2.1_VAE.pth");
  ck.require_loadable();
  const VaeConfig& c = ck.config();
  EXPECT_EQ(c.dim, 8);
  EXPECT_EQ(c.z_dim, 16);
  EXPECT_EQ(c.num_res_blocks, 1);
  EXPECT_EQ(c.dim_mult, (std::vector<int64_t>{1, 2, 4, 8}));
  // The loader applies the official Wan 2.1 statistics; parity.py decoded with the same ones
  // (the model's own statistics are folded into conv1/conv2, docs/vidax-tiny.md).
  const Tensor mean = io.tensor("scale_mean").contiguous();
  ASSERT_EQ(c.latent_mean.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(c.latent_mean[i], mean.data<float>()[i]);
  WanVae vae(c, ck.loader(), Precision::kFP32, VaeParts::kDecoder);
  const Tensor dec = vae.decode(io.tensor("z"));  // [3, 9, 64, 64]
  const Tensor want = io.tensor("dec_out");       // [1, 3, 9, 64, 64]
  EXPECT_TRUE(all_close(dec.unsqueeze(0), want, 1e-5, 1e-5, "dec_out"));
}

}  // namespace
}  // namespace vidax::wan
