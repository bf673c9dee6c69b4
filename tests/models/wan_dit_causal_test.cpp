// Causal forwards of the Wan DiT (DitSample::kv_cache, DitSample::causal_block_frames): the
// Self-Forcing reference's training forward with its block-causal mask and its KV-cache
// forward chunk by chunk (tests/data/rollout/block_causal), chunks through a cache equal one
// block-causal forward on random weights (fp32 and bf16, ragged frames), the cache's
// bookkeeping (append, rewrite, rolling eviction as the reference), and the refusals.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/wan/causal_kv_cache.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::all_close;

// Frame-major [1, F, C, H, W] -> [C, F, H, W].
Tensor channel_major(const Tensor& fm) {
  return fm.select(0, 0).permute({1, 0, 2, 3}).contiguous();
}

Tensor frames(const Tensor& x, int64_t f0, int64_t n) {  // [C, F, H, W] -> [C, n, H, W]
  return x.slice(1, f0, f0 + n).contiguous().clone();
}

Tensor scalar(float v) { return Tensor::from_floats(std::vector<float>{v}, Shape{1}); }

KvCacheOptions cache_options(int64_t frame_tokens, int64_t frames, int64_t sink = 0,
                             bool rolling = false) {
  KvCacheOptions o;
  o.frame_tokens = frame_tokens;
  o.capacity_frames = frames;
  o.sink_frames = sink;
  o.rolling = rolling;
  return o;
}

TEST(WanDitCausal, ReferenceBlockCausalAndCachedForwards) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const SafetensorsFile io = SafetensorsFile::open(
      std::string(VIDAX_SOURCE_DIR) + "/tests/data/rollout/block_causal.io.safetensors");
  auto ck = DitCheckpoint::open(weights);
  WanDit dit(
      ck.config(), [&](const std::string& n) { return ck.get(n); }, Precision::kFP32);
  const Tensor x = channel_major(io.tensor("x"));  // [16, 9, 4, 6]
  DitSample s;
  s.x = x;
  s.context = io.tensor("context");
  s.t = scalar(500.0f);
  s.causal_block_frames = 3;
  const double tol = 1e-4;
  EXPECT_TRUE(all_close(dit.forward(s), channel_major(io.tensor("train.flow")), tol, tol,
                        "block-causal forward vs the reference's training forward"));
  CausalKvCache cache(2, 256, false, cache_options(6, 9));
  s.causal_block_frames = 0;
  s.kv_cache = &cache;
  for (int64_t c = 0; c < 3; ++c) {
    s.x = frames(x, 3 * c, 3);
    s.start_frame = 3 * c;
    const std::string name = "cache.chunk" + std::to_string(c) + ".flow";
    EXPECT_TRUE(all_close(dit.forward(s), channel_major(io.tensor(name)), tol, tol, name));
  }
  EXPECT_EQ(cache.global_end(), 54);
  EXPECT_EQ(cache.local_end(), 54);
}

DitConfig small_config() {
  DitConfig c;
  c.dim = 128, c.num_heads = 2, c.ffn_dim = 192, c.num_layers = 3, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16;
  return c;
}

// Chunks of `chunk` frames through a global cache, each at its own timestep then rewritten by a
// clean pass at t = 0, equal a block-causal forward of the clean chunks at t = 0 (what the
// clean passes attend to); the cache rows after each pass hold what that forward's keys are.
TEST(WanDitCausal, CachedChunksEqualOneBlockCausalForward) {
  for (Precision p : {Precision::kFP32, Precision::kBF16}) {
    const DitConfig c = small_config();
    WanDit dit(c, random_dit_weights(c, DType::kF32, 7), p);
    const int64_t chunk = 2, F = 6;
    const Tensor clean = vidax::testing::random_tensor(Shape{16, F, 6, 10}, 3);  // 15 tokens/frame
    const Tensor context = vidax::testing::random_tensor(Shape{5, 16}, 4);
    DitSample whole;
    whole.x = clean;
    whole.context = context;
    whole.t = scalar(0.0f);
    whole.causal_block_frames = chunk;
    const Tensor ref = dit.forward(whole);
    CausalKvCache cache(3, 128, p == Precision::kBF16, cache_options(15, F));
    DitSample s;
    s.context = context;
    s.kv_cache = &cache;
    const double tol = p == Precision::kFP32 ? 2e-5 : 3e-2;
    for (int64_t f0 = 0; f0 < F; f0 += chunk) {
      s.start_frame = f0;
      s.x = vidax::testing::random_tensor(Shape{16, chunk, 6, 10}, static_cast<uint32_t>(10 + f0));
      s.t = scalar(800.0f);
      dit.forward(s);  // a noisy step: its rows are rewritten below
      s.x = frames(clean, f0, chunk);
      s.t = scalar(0.0f);
      const Tensor out = dit.forward(s);
      EXPECT_TRUE(
          all_close(out, frames(ref, f0, chunk), tol, tol, "chunk at frame " + std::to_string(f0)));
      EXPECT_EQ(cache.global_end(), (f0 + chunk) * 15);
    }
  }
}

TEST(WanDitCausal, BlockCausalOfOneChunkIsTheBidirectionalForward) {
  const DitConfig c = small_config();
  WanDit dit(c, random_dit_weights(c, DType::kF32, 8), Precision::kFP32);
  DitSample s;
  s.x = vidax::testing::random_tensor(Shape{16, 3, 4, 6}, 5);
  s.context = vidax::testing::random_tensor(Shape{5, 16}, 6);
  s.t = scalar(300.0f);
  const Tensor bidirectional = dit.forward(s);
  s.causal_block_frames = 3;
  EXPECT_TRUE(all_close(dit.forward(s), bidirectional, 0, 0, "one chunk"));
  s.causal_block_frames = 1;  // frame-causal differs
  EXPECT_FALSE(all_close(dit.forward(s), bidirectional, 1e-3, 1e-3, "frame-causal"));
}

TEST(KvCache, BookkeepingFollowsTheReference) {
  // The reference's rolling case: 6 tokens a frame, 5 frames, 1 sink frame, chunks of 3.
  CausalKvCache cache(1, 4, false, cache_options(6, 5, 1, true));
  const std::vector<std::array<int64_t, 3>> expect = {// evicted, local_end, global_end
                                                      {0, 18, 18},
                                                      {6, 30, 36},
                                                      {18, 30, 54},
                                                      {18, 30, 72}};
  for (int64_t c = 0; c < 4; ++c) {
    const KvCacheSlot append = cache.plan(18 * c, 18);
    EXPECT_EQ(append.evict, expect[static_cast<size_t>(c)][0]) << c;
    EXPECT_EQ(append.local_end, expect[static_cast<size_t>(c)][1]) << c;
    EXPECT_EQ(append.global_end, expect[static_cast<size_t>(c)][2]) << c;
    EXPECT_EQ(append.write_end - append.write_begin, 18);
    // Mark each row with its absolute token to follow the eviction.
    cache.evict(0, append);
    float* rows = cache.rows32(0);
    for (int64_t r = append.write_begin; r < append.write_end; ++r)
      rows[r * 8] = static_cast<float>(18 * c + r - append.write_begin);
    cache.commit(append);
    const KvCacheSlot rewrite = cache.plan(18 * c, 18);  // the chunk's later calls
    EXPECT_EQ(rewrite.evict, 0);
    EXPECT_EQ(rewrite.write_begin, append.write_begin);
    EXPECT_EQ(rewrite.local_end, append.local_end);
  }
  // After chunk 3: the sink frame (tokens 0..5), then frame 8 (48..53) and frames 9..11.
  const float* rows = cache.rows32(0);
  for (int64_t r = 0; r < 6; ++r) EXPECT_EQ(rows[r * 8], static_cast<float>(r));
  for (int64_t r = 6; r < 30; ++r) EXPECT_EQ(rows[r * 8], static_cast<float>(42 + r)) << r;
}

TEST(KvCache, MisuseIsRefused) {
  CausalKvCache global(1, 4, false, cache_options(6, 4));
  EXPECT_THROW(global.plan(6, 6), InputError);  // a gap
  global.commit(global.plan(0, 18));
  EXPECT_THROW(global.plan(12, 18), InputError);  // overlaps without ending at the end
  EXPECT_THROW(global.plan(18, 18), InputError);  // full, and it does not roll
  global.invalidate();
  EXPECT_THROW(global.plan(0, 18), InputError);
  global.reset();
  EXPECT_NO_THROW(global.plan(0, 18));
  EXPECT_THROW(CausalKvCache(1, 4, false, cache_options(6, 3, 3, true)), InputError);  // sink
  CausalKvCache small(1, 4, false, cache_options(6, 4, 2, true));
  EXPECT_THROW(small.plan(0, 18), InputError);  // a chunk larger than the window after the sink
}

TEST(WanDitCausal, BadCausalCallsAreRefused) {
  const DitConfig c = small_config();
  WanDit dit(c, random_dit_weights(c, DType::kF32, 9), Precision::kFP32);
  DitSample s;
  s.x = vidax::testing::random_tensor(Shape{16, 3, 4, 6}, 5);
  s.context = vidax::testing::random_tensor(Shape{5, 16}, 6);
  s.t = scalar(300.0f);
  s.causal_block_frames = 2;  // does not divide 3 frames
  EXPECT_THROW(dit.forward(s), InputError);
  s.causal_block_frames = 0;
  CausalKvCache wrong_frame(3, 128, false, cache_options(5, 6));
  s.kv_cache = &wrong_frame;
  EXPECT_THROW(dit.forward(s), InputError);
  CausalKvCache wrong_dtype(3, 128, true, cache_options(6, 6));
  s.kv_cache = &wrong_dtype;
  EXPECT_THROW(dit.forward(s), InputError);
  CausalKvCache ok(3, 128, false, cache_options(6, 6));
  s.kv_cache = &ok;
  s.start_frame = 3;  // skips frames 0..2
  EXPECT_THROW(dit.forward(s), InputError);
  s.start_frame = 0;
  s.causal_block_frames = 3;  // both at once
  EXPECT_THROW(dit.forward(s), InputError);
  s.causal_block_frames = 0;
  EXPECT_NO_THROW(dit.forward(s));
}

TEST(WanDitCausal, RollsPastTheReferencesRopeTable) {
  // The reference's frequency table ends at frame 1024 (it fails there); vidax's grows.
  DitConfig c = small_config();
  c.num_layers = 1;
  WanDit dit(c, random_dit_weights(c, DType::kF32, 10), Precision::kFP32);
  CausalKvCache cache(1, 128, false, cache_options(1, 6, 1, true));
  DitSample s;
  s.context = vidax::testing::random_tensor(Shape{5, 16}, 6);
  s.t = scalar(0.0f);
  s.kv_cache = &cache;
  for (int64_t f0 = 0; f0 < 1032; f0 += 3) {
    s.x = vidax::testing::random_tensor(Shape{16, 3, 2, 2}, static_cast<uint32_t>(f0));
    s.start_frame = f0;
    const Tensor out = dit.forward(s);
    if (f0 + 3 >= 1024) {
      for (int64_t i = 0; i < out.numel(); ++i) ASSERT_TRUE(std::isfinite(out.data<float>()[i]));
    }
  }
  EXPECT_EQ(cache.global_end(), 1032);
  EXPECT_EQ(cache.local_end(), 6);
}

}  // namespace
}  // namespace vidax::wan

namespace vidax::wan {
namespace {

TEST(KvCache, PersistentBlocksKeepTheMostSalientEvictedRowsInOrder) {
  // 4 tokens a frame in blocks of 2, 1 sink frame + 2 window frames, room for 2 blocks.
  KvCacheOptions o = cache_options(4, 3, 1, true);
  o.persistent_tokens = 4;
  o.block_tokens = 2;
  o.score_decay = 1.0;
  CausalKvCache cache(1, 1, false, o);
  auto append = [&](int64_t frame) {  // one frame per chunk; each row holds its token
    const KvCacheSlot s = cache.plan(frame * 4, 4);
    cache.evict(0, s);
    float* rows = cache.rows32(0);
    for (int64_t r = s.write_begin; r < s.write_end; ++r)
      rows[r * 2] = static_cast<float>(frame * 4 + r - s.write_begin);
    cache.commit(s);
  };
  for (int64_t f = 0; f < 3; ++f) append(f);  // full: frames 0 (sink), 1, 2
  cache.add_block_mass(6, 5.0);               // frame 1's second block is salient
  cache.add_block_mass(4, 1.0);
  append(3);  // evicts frame 1: both its blocks fit the room
  EXPECT_EQ(cache.persistent_rows(), 4);
  cache.add_block_mass(8, 9.0);  // frame 2's first block beats frame 1's first
  append(4);                     // evicts frame 2: the room keeps blocks 6 and 8
  ASSERT_EQ(cache.persistent_blocks().size(), 2u);
  EXPECT_EQ(cache.persistent_blocks()[0].begin, 6);
  EXPECT_EQ(cache.persistent_blocks()[1].begin, 8);
  // [sink 0..3 | 6 7 8 9 | frames 3, 4], rows in absolute order, and token_of_row agrees.
  const std::vector<float> want = {0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19};
  ASSERT_EQ(cache.local_end(), static_cast<int64_t>(want.size()));
  for (int64_t r = 0; r < cache.local_end(); ++r) {
    EXPECT_EQ(cache.rows32(0)[r * 2], want[static_cast<size_t>(r)]) << r;
    EXPECT_EQ(cache.token_of_row(r), static_cast<int64_t>(want[static_cast<size_t>(r)])) << r;
  }
  EXPECT_EQ(cache.bytes(), 1.0 * (12 + 4) * 2 * 4);  // flat: sink + window + room
}

}  // namespace
}  // namespace vidax::wan
