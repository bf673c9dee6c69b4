// Streamed DiT blocks (WeightResidency): under every budget from one block to all of them, a
// model reading its blocks from the checkpoint file at every forward gives, bit for bit, the
// resident model's prediction over several forwards (fp32 and bf16, t2v and i2v), and keeps its
// packed weights under the budget; a budget below one block is refused with the sizes.
#include <gtest/gtest.h>

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

DitConfig tiny(bool i2v) {
  DitConfig c;
  c.kind = i2v ? DitKind::kI2V : DitKind::kT2V;
  c.dim = 256, c.num_heads = 2, c.ffn_dim = 384, c.num_layers = 5, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16, c.in_dim = i2v ? 36 : 16;  // clip_dim: the real 1280
  return c;
}

DitSample sample(bool i2v, float t, uint32_t seed) {
  DitSample s;
  s.x = vidax::testing::random_tensor(Shape{16, 2, 4, 6}, seed);
  if (i2v) {
    s.y = vidax::testing::random_tensor(Shape{20, 2, 4, 6}, seed + 1);
    s.clip_fea = vidax::testing::random_tensor(Shape{1, 7, 1280}, seed + 2);
  }
  s.context = vidax::testing::random_tensor(Shape{3, 16}, seed + 3);
  s.t = Tensor::from_floats(std::vector<float>{t}, Shape{1});
  return s;
}

TEST(WanDitStreaming, EveryBudgetGivesTheResidentResultBitForBit) {
  vidax::testing::TempDir dir;
  for (bool i2v : {false, true}) {
    const DitConfig c = tiny(i2v);
    const std::string path = dir.file(i2v ? "i2v.safetensors" : "t2v.safetensors");
    write_random_dit_checkpoint(path, c, DType::kF32, 7);
    const auto ck = std::make_shared<const DitCheckpoint>(DitCheckpoint::open(path));
    ck->require_loadable();
    for (Precision p : {Precision::kFP32, Precision::kBF16}) {
      WanDit resident(c, ck->loader(), p);
      std::vector<std::vector<float>> want;
      for (int call = 0; call < 3; ++call)
        want.push_back(resident.forward(sample(i2v, 900.0f - 300 * call, 10)).to_float_vector());
      // The budget in blocks beyond the embeddings and head: 1 (window 1), 2 (window 2),
      // 4 (2 kept, 2 streamed), 5 and more (all kept).
      wan::DitConfig stem_config = c;
      stem_config.num_layers = 0;
      const auto stem = static_cast<double>(WanDit(stem_config, ck->loader(), p).weight_bytes());
      const double block = WanDit::block_weight_bytes(c, p);
      for (int blocks : {1, 2, 4, 5, 9}) {
        WeightResidency r;
        r.budget_bytes = static_cast<int64_t>(stem + (blocks + 0.5) * block);
        WanDit streamed(c, shared_loader(ck), p, {}, r);
        EXPECT_LE(static_cast<double>(streamed.weight_bytes()), r.budget_bytes) << blocks;
        const WeightStreamStats st = streamed.weight_stream_stats();
        EXPECT_EQ(st.pinned_blocks + st.streamed_blocks, 5);
        EXPECT_EQ(st.streamed_blocks, blocks >= 5 ? 0 : (blocks >= 2 ? 5 - (blocks - 2) : 5));
        for (int call = 0; call < 3; ++call) {
          ASSERT_EQ(streamed.forward(sample(i2v, 900.0f - 300 * call, 10)).to_float_vector(),
                    want[static_cast<size_t>(call)])
              << "budget " << blocks << " blocks, call " << call << (i2v ? " i2v" : " t2v")
              << (p == Precision::kBF16 ? " bf16" : " fp32");
        }
        // Every streamed block was read once per forward; the loader may already hold the next
        // forward's first ones (up to the window).
        const int64_t loads = streamed.weight_stream_stats().loads;
        EXPECT_GE(loads, 3 * st.streamed_blocks) << blocks;
        EXPECT_LE(loads, 3 * st.streamed_blocks + st.window) << blocks;
        EXPECT_EQ(streamed.weight_stream_stats().uses, 3 * st.streamed_blocks) << blocks;
      }
    }
  }
}

TEST(WanDitStreaming, ABudgetBelowOneBlockIsRefused) {
  vidax::testing::TempDir dir;
  const DitConfig c = tiny(false);
  const std::string path = dir.file("t2v.safetensors");
  write_random_dit_checkpoint(path, c, DType::kF32, 7);
  const auto ck = std::make_shared<const DitCheckpoint>(DitCheckpoint::open(path));
  WeightResidency r;
  r.budget_bytes = static_cast<int64_t>(WanDit::block_weight_bytes(c, Precision::kFP32) / 2);
  try {
    WanDit model(c, shared_loader(ck), Precision::kFP32, {}, r);
    FAIL() << "a budget of half a block was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("smaller than the embeddings and head"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vidax::wan
