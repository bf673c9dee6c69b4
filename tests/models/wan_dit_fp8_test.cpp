// fp8 weights kept fp8 (WeightResidency::fp8) on a ComfyUI scaled-fp8 file written by
// write_random_dit_checkpoint: the blocks hold half the bytes of bf16; the prediction equals
// the converted-at-load model's within the weights' bf16 rounding (bf16) or f32 rounding
// (fp32), t2v and i2v; streamed under a budget it is bit for bit the resident fp8 model. fp16
// weights kept fp16 (fp32 compute) hold half of f32 and give the converted model's result to
// f32 summation order; bf16 refuses them.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

// A small t2v or i2v DiT (two heads of 128, three blocks) and one sample for it at timestep t.
DitConfig tiny_config(bool i2v) {
  DitConfig c;
  c.kind = i2v ? DitKind::kI2V : DitKind::kT2V;
  c.dim = 256, c.num_heads = 2, c.ffn_dim = 384, c.num_layers = 3, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16, c.in_dim = i2v ? 36 : 16;
  return c;
}
DitSample tiny_sample(bool i2v, float t) {
  DitSample s;
  s.x = vidax::testing::random_tensor(Shape{16, 2, 4, 6}, 1);
  if (i2v) {
    s.y = vidax::testing::random_tensor(Shape{20, 2, 4, 6}, 2);
    s.clip_fea = vidax::testing::random_tensor(Shape{1, 7, 1280}, 3);
  }
  s.context = vidax::testing::random_tensor(Shape{3, 16}, 4);
  s.t = Tensor::from_floats(std::vector<float>{t}, Shape{1});
  return s;
}

TEST(WanDitFp8, KeptFp8MatchesConvertedAndHalvesTheBlocks) {
  vidax::testing::TempDir dir;
  for (bool i2v : {false, true}) {
    const DitConfig c = tiny_config(i2v);
    const std::string path = dir.file(i2v ? "i2v_fp8.safetensors" : "t2v_fp8.safetensors");
    write_random_dit_checkpoint(path, c, DType::kF8E4M3, 11);
    const auto ck = std::make_shared<const DitCheckpoint>(DitCheckpoint::open(path));
    ck->require_loadable();
    EXPECT_EQ(ck->layout(), DitLayout::kComfyUI);
    const DitSample s = tiny_sample(i2v, 700.0f);
    for (Precision p : {Precision::kFP32, Precision::kBF16}) {
      WanDit converted(c, ck->loader(), p);
      WeightResidency keep;
      keep.fp8 = kept_weight_loader(ck, true);
      WanDit kept(c, shared_loader(ck), p, {}, keep);
      DitConfig stem_config = c;
      stem_config.num_layers = 0;
      const auto stem = static_cast<double>(WanDit(stem_config, ck->loader(), p).weight_bytes());
      const double blocks_converted = static_cast<double>(converted.weight_bytes()) - stem;
      const double blocks_kept = static_cast<double>(kept.weight_bytes()) - stem;
      // One byte per weight against 2 (bf16) or 4 (f32), the vectors aside.
      EXPECT_LT(blocks_kept, (p == Precision::kBF16 ? 0.55 : 0.28) * blocks_converted);
      const Tensor want = converted.forward(s);
      const Tensor got = kept.forward(s);
      EXPECT_LE(vidax::testing::max_rel_diff(got, want), p == Precision::kBF16 ? 3e-2 : 1e-4)
          << (i2v ? "i2v" : "t2v") << (p == Precision::kBF16 ? " bf16" : " fp32");
      // Streamed under a budget of about two blocks: bitwise the resident fp8 model.
      WeightResidency budget = keep;
      budget.budget_bytes =
          static_cast<int64_t>(stem + 2.5 * WanDit::block_weight_bytes(c, p, 1, 1));
      WanDit streamed(c, shared_loader(ck), p, {}, budget);
      EXPECT_GT(streamed.weight_stream_stats().streamed_blocks, 0);
      EXPECT_EQ(streamed.forward(s).to_float_vector(), got.to_float_vector());
    }
  }
}

TEST(WanDitFp16, KeptFp16MatchesConvertedAndHalvesTheBlocks) {
  vidax::testing::TempDir dir;
  for (bool i2v : {false, true}) {
    const DitConfig c = tiny_config(i2v);
    const std::string path = dir.file(i2v ? "i2v_f16.safetensors" : "t2v_f16.safetensors");
    write_random_dit_checkpoint(path, c, DType::kF16, 12);
    const auto ck = std::make_shared<const DitCheckpoint>(DitCheckpoint::open(path));
    ck->require_loadable();
    const DitSample s = tiny_sample(i2v, 300.0f);
    WanDit converted(c, ck->loader(), Precision::kFP32);
    WanDit kept = open_dit(ck, Precision::kFP32, {}, 0, false, false, /*keep_fp16=*/true);
    DitConfig stem_config = c;
    stem_config.num_layers = 0;
    const auto stem =
        static_cast<double>(WanDit(stem_config, ck->loader(), Precision::kFP32).weight_bytes());
    const double blocks_converted = static_cast<double>(converted.weight_bytes()) - stem;
    const double blocks_kept = static_cast<double>(kept.weight_bytes()) - stem;
    EXPECT_LT(blocks_kept, 0.53 * blocks_converted) << (i2v ? "i2v" : "t2v");
    EXPECT_GT(blocks_kept, 0.45 * blocks_converted) << (i2v ? "i2v" : "t2v");
    const Tensor want = converted.forward(s);
    EXPECT_LE(vidax::testing::max_rel_diff(kept.forward(s), want), 1e-5) << (i2v ? "i2v" : "t2v");
    // Streamed under a budget of about two blocks: bitwise the resident fp16 model.
    WanDit streamed = open_dit(
        ck, Precision::kFP32, {},
        static_cast<int64_t>(stem + 2.5 * WanDit::block_weight_bytes(c, Precision::kFP32, 1, 2)),
        false, false, true);
    EXPECT_GT(streamed.weight_stream_stats().streamed_blocks, 0);
    EXPECT_EQ(streamed.forward(s).to_float_vector(), kept.forward(s).to_float_vector());
    // bf16 holds fp16 at the same size: refused with the reason.
    try {
      open_dit(ck, Precision::kBF16, {}, 0, false, false, true);
      ADD_FAILURE() << "--keep-fp16 with bf16 was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--precision fp32"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vidax::wan
