// Causal rollout parity with the public Self-Forcing inference code (tests/data/rollout, made by
// running it on the tiny Wan DiT; README there): chunk by chunk every step's timestep, flow,
// x0 and drawn noise, each chunk's latent and the key/value cache after its clean pass, for
// the Self-Forcing DMD schedule with a global and a rolling (sink + window) cache and for
// CausVid's list. Then the structural checks: the schedule table, the rollout with a global
// cache equal to one block-causal forward, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "pipeline/causal_rollout.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;

std::string rollout_fixture(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/rollout/" + name;
}

// Frame-major [1, F, C, H, W] (the reference's layout) -> [C, F, H, W].
Tensor channel_major(const Tensor& fm) {
  const Tensor t = fm.rank() == 5 ? fm.select(0, 0) : fm;  // [F, C, H, W]
  return t.permute({1, 0, 2, 3}).contiguous();
}

std::string meta(const SafetensorsFile& io, const std::string& key) {
  const auto& m = io.metadata();
  const auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

RolloutOptions options_of(const SafetensorsFile& io) {
  RolloutOptions o;
  o.schedule.steps.clear();
  // The configured list (the file's effective list is the warped one).
  const std::string list = meta(io, "denoising_step_list_config");  // "[1000, 750, 500, 250]"
  for (size_t i = 0; i < list.size();) {
    const size_t j = list.find_first_of("0123456789", i);
    if (j == std::string::npos) break;
    size_t used = 0;
    o.schedule.steps.push_back(std::stod(list.substr(j), &used));
    i = j + used;
  }
  const std::string warp = meta(io, "warp_denoising_step");
  o.schedule.warp = warp == "True" || warp == "true";
  o.schedule.shift = std::stod(meta(io, "timestep_shift"));
  o.chunk_frames = std::stoll(meta(io, "num_frame_per_block"));
  o.local_attn_frames = std::stoll(meta(io, "local_attn_size"));
  o.sink_frames = std::stoll(meta(io, "sink_size"));
  o.seed = static_cast<uint64_t>(io.tensor("seed").contiguous().data<int64_t>()[0]);
  return o;
}

void expect_rollout_matches(const std::string& file) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const SafetensorsFile io = SafetensorsFile::open(rollout_fixture(file));
  auto ck = wan::DitCheckpoint::open(weights);
  wan::WanDit dit(
      ck.config(), [&](const std::string& n) { return ck.get(n); }, wan::Precision::kFP32);
  RolloutOptions o = options_of(io);
  // The fixture's cache holds 126 tokens (the reference's 32,760 scaled to 21 frames of 6).
  ASSERT_EQ(meta(io, "kv_cache_capacity_tokens"), o.local_attn_frames == -1 ? "126" : "30");
  const Tensor noise = channel_major(io.tensor("noise"));
  CausalRollout r(dit, io.tensor("context"), noise.shape(), o);
  ASSERT_EQ(r.chunks() * o.chunk_frames, noise.dim(1));
  EXPECT_EQ(r.plan().rolling, o.local_attn_frames != -1);
  const double tol = 1e-4;
  int64_t step_noise = 0;
  Tensor output = Tensor::zeros(noise.shape());
  while (!r.done()) {
    const int64_t c = r.next_chunk();
    const std::string p = "chunk" + std::to_string(c) + ".";
    int compared = 0;
    const Tensor x0 = r.step([&](int64_t chunk, const std::string& name, const Tensor& v) {
      ASSERT_EQ(chunk, c);
      if (name.size() > 6 && name.substr(name.size() - 6) == ".noise") {
        const Tensor ref = channel_major(io.tensor("step_noise." + std::to_string(step_noise++)));
        EXPECT_TRUE(all_close(v, ref, 0, 0, p + name));  // the generator stream, bit for bit
        ++compared;
        return;
      }
      const std::string key = p + name;
      ASSERT_TRUE(io.contains(key)) << key;
      if (name.size() > 2 && name.substr(name.size() - 2) == ".t") {
        const Tensor raw = io.tensor(key);  // [1, n] per frame, one value (f32, or i64 unwarped)
        const Tensor ref = raw.dtype() == DType::kI64 ? Tensor() : raw.contiguous();
        if (!ref.defined()) {
          for (int64_t i = 0; i < raw.numel(); ++i)
            EXPECT_EQ(v.data<float>()[0], static_cast<float>(raw.contiguous().data<int64_t>()[i]))
                << key;
          ++compared;
          return;
        }
        for (int64_t i = 0; i < ref.numel(); ++i)
          EXPECT_EQ(v.data<float>()[0], ref.data<float>()[i]) << key;
      } else {
        EXPECT_TRUE(all_close(v, channel_major(io.tensor(key)), tol, tol, key));
      }
      ++compared;
    });
    EXPECT_GE(compared, 8) << p;
    EXPECT_TRUE(all_close(x0, channel_major(io.tensor(p + "x0")), tol, tol, p + "x0"));
    for (int64_t ch = 0; ch < output.dim(0); ++ch)  // per channel the frames are contiguous
      output.select(0, ch)
          .slice(0, c * o.chunk_frames, (c + 1) * o.chunk_frames)
          .copy_from(x0.select(0, ch).contiguous());
    // The cache after the clean pass: its ends and layer 0's keys / values.
    const wan::CausalKvCache& kc = r.cache();
    EXPECT_EQ(kc.global_end(), io.tensor(p + "cache.layer0.global_end").data<int64_t>()[0]) << p;
    EXPECT_EQ(kc.local_end(), io.tensor(p + "cache.layer0.local_end").data<int64_t>()[0]) << p;
    const Tensor ref_k = io.tensor(p + "cache.layer0.k");  // [1, valid, heads, hd]
    const int64_t valid = ref_k.dim(1), width = kc.width();
    ASSERT_EQ(valid, kc.local_end());
    auto& mut = const_cast<wan::CausalKvCache&>(kc);
    const float* rows = mut.rows32(0);
    Tensor k = Tensor::zeros(ref_k.shape()), v = Tensor::zeros(ref_k.shape());
    for (int64_t t = 0; t < valid; ++t)
      for (int64_t j = 0; j < width; ++j) {
        k.mutable_data<float>()[t * width + j] = rows[t * 2 * width + j];
        v.mutable_data<float>()[t * width + j] = rows[t * 2 * width + width + j];
      }
    EXPECT_TRUE(all_close(k, ref_k, tol, tol, p + "cache.layer0.k"));
    EXPECT_TRUE(all_close(v, io.tensor(p + "cache.layer0.v"), tol, tol, p + "cache.layer0.v"));
  }
  EXPECT_TRUE(all_close(output, channel_major(io.tensor("output")), tol, tol, "output"));
  int64_t stored = 0;
  for (const auto& e : io.entries()) stored += e.name.rfind("step_noise.", 0) == 0;
  EXPECT_EQ(step_noise, stored);  // every draw of the reference, none more
}

TEST(CausalRollout, SelfForcingGlobalCacheMatchesTheReference) {
  expect_rollout_matches("sf_global.io.safetensors");
}

TEST(CausalRollout, SelfForcingRollingCacheMatchesTheReference) {
  expect_rollout_matches("sf_rolling.io.safetensors");
}

TEST(CausalRollout, CausVidScheduleMatchesTheReference) {
  expect_rollout_matches("causvid.io.safetensors");
}

TEST(CausalRollout, ScheduleTableIsTheReferencesBitForBit) {
  for (const char* file : {"sf_global.io.safetensors", "causvid.io.safetensors"}) {
    const SafetensorsFile io = SafetensorsFile::open(rollout_fixture(file));
    const RolloutOptions o = options_of(io);
    const FlowMatchTable t = flow_match_table(o.schedule.shift);
    const Tensor ts = io.tensor("scheduler.timesteps"), sg = io.tensor("scheduler.sigmas");
    ASSERT_EQ(static_cast<int64_t>(t.timesteps.size()), ts.numel());
    int64_t bad = 0;
    for (int64_t i = 0; i < ts.numel(); ++i)
      bad += t.timesteps[static_cast<size_t>(i)] != ts.data<float>()[i] ||
             t.sigmas[static_cast<size_t>(i)] != sg.data<float>()[i];
    EXPECT_EQ(bad, 0) << file;
  }
  const RolloutSchedule s = rollout_schedule({});
  EXPECT_EQ(s.t, (std::vector<float>{1000.0f, 937.5f, 833.33331298828125f, 625.0f}));
}

TEST(CausalRollout, LinspaceIsTorchs) {
  // torch.linspace(0.2, 7.3, 777)[k] for a few k (printed by PyTorch 1.13 on CPU), and the
  // symmetric ends of torch.linspace(1, 0, 1001).
  const std::vector<float> a = torch_linspace_f32(1.0f, 0.0f, 1001);
  EXPECT_EQ(a.front(), 1.0f);
  EXPECT_EQ(a.back(), 0.0f);
  EXPECT_EQ(a[104], 0.89599996805191040039f);  // the 8-wide vector's fused base
  EXPECT_EQ(a[15], 0.98499995470046997070f);
}

}  // namespace
}  // namespace vidax

namespace vidax {
namespace {

wan::DitConfig tiny_dit() {
  wan::DitConfig c;
  c.dim = 128, c.num_heads = 2, c.ffn_dim = 192, c.num_layers = 2, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16;
  return c;
}

std::vector<Tensor> roll(wan::WanDit& dit, const RolloutOptions& o, int64_t frames,
                         double* cache_bytes = nullptr) {
  const Tensor context = vidax::testing::random_tensor(Shape{5, 16}, 4);
  CausalRollout r(dit, context, Shape{16, frames, 4, 6}, o);
  std::vector<Tensor> chunks;
  while (!r.done()) chunks.push_back(r.step());
  if (cache_bytes) *cache_bytes = r.cache().bytes();
  return chunks;
}

// PBSA with room for every evicted block and density 1 keeps the full cache's rows in its order:
// the rollout is the global-cache rollout bit for bit, in fp32 and bf16.
TEST(Pbsa, EveryBlockKeptEqualsTheFullCacheBitForBit) {
  for (wan::Precision p : {wan::Precision::kFP32, wan::Precision::kBF16}) {
    const wan::DitConfig c = tiny_dit();
    wan::WanDit dit(c, wan::random_dit_weights(c, DType::kF32, 3), p);
    RolloutOptions full;
    full.seed = 9;
    RolloutOptions pbsa = full;
    pbsa.pbsa = sparse::parse_pbsa_spec("pbsa:window=3,sink=1,persist=100,density=1,block=16");
    const auto a = roll(dit, full, 15), b = roll(dit, pbsa, 15);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(all_close(b[i], a[i], 0, 0, "chunk " + std::to_string(i)));
  }
}

// A bounded persistent room and density < 1: the cache stays at sink + window + persist rows
// whatever the length, the result changes but stays near the full cache's.
TEST(Pbsa, BoundedCacheStaysFlatAndCloseToTheFullCache) {
  const wan::DitConfig c = tiny_dit();
  wan::WanDit dit(c, wan::random_dit_weights(c, DType::kF32, 3), wan::Precision::kFP32);
  RolloutOptions full;
  full.seed = 2;
  RolloutOptions pbsa = full;
  pbsa.pbsa = sparse::parse_pbsa_spec("pbsa:window=6,sink=1,persist=1,density=0.5,block=16");
  double full_bytes = 0, short_bytes = 0, long_bytes = 0;
  const auto a = roll(dit, full, 15, &full_bytes);
  const auto b = roll(dit, pbsa, 15, &short_bytes);
  (void)roll(dit, pbsa, 30, &long_bytes);
  EXPECT_EQ(short_bytes, long_bytes);        // flat with length
  EXPECT_LT(short_bytes, 0.6 * full_bytes);  // 8 of 15 frames' rows
  double worst = 0;
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, vidax::testing::max_rel_diff(b[i], a[i]));
    differs = differs || !all_close(b[i], a[i], 0, 0);
  }
  EXPECT_TRUE(differs);
  EXPECT_LT(worst, 0.5);  // random weights attend broadly; a sanity bound, not a quality claim
  // Nothing evicted (the window holds the whole video): only the block-sparse window differs.
  RolloutOptions sparse_only = full;
  sparse_only.pbsa = sparse::parse_pbsa_spec("pbsa:window=12,sink=3,density=0.5,block=16");
  const auto s = roll(dit, sparse_only, 15);
  bool sparse_differs = false;
  for (size_t i = 0; i < a.size(); ++i)
    sparse_differs = sparse_differs || !all_close(s[i], a[i], 0, 0);
  EXPECT_TRUE(sparse_differs);
}

TEST(CausalRollout, ACancelledChunkEndsTheRollout) {
  const wan::DitConfig c = tiny_dit();
  wan::WanDit dit(c, wan::random_dit_weights(c, DType::kF32, 3), wan::Precision::kFP32);
  CausalRollout r(dit, vidax::testing::random_tensor(Shape{5, 16}, 4), Shape{16, 9, 4, 6}, {});
  (void)r.step();
  int calls = 0;
  r.set_cancel([&] { return ++calls == 3; });  // part-way through chunk 1
  EXPECT_THROW(r.step(), Cancelled);
  EXPECT_EQ(r.dit_calls(), 5);         // chunk 0's only
  EXPECT_THROW(r.step(), InputError);  // the cache and noise are mid-chunk: no going on
}

TEST(Pbsa, SpecsAreParsedAndCheckedAndRefusedWithTheWrongCacheFlags) {
  const sparse::PbsaOptions d = sparse::parse_pbsa_spec("pbsa");
  EXPECT_EQ(sparse::parse_pbsa_spec(d.spec()).spec(), d.spec());
  EXPECT_THROW(sparse::parse_pbsa_spec("pbsa:density=2"), InputError);
  EXPECT_THROW(sparse::parse_pbsa_spec("pbsa:windw=3"), InputError);
  EXPECT_THROW(sparse::parse_pbsa_spec("pbsa:block=1"), InputError);  // masks of 1-token blocks
  RolloutOptions o;
  o.pbsa = d;
  o.local_attn_frames = 6;
  EXPECT_THROW(plan_rollout(o, 21, 6), InputError);
  o.local_attn_frames = -1;
  o.pbsa->window_frames = 2;  // smaller than a chunk
  EXPECT_THROW(plan_rollout(o, 21, 6), InputError);
}

}  // namespace
}  // namespace vidax
