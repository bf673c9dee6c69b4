// Kaleido (channel-group reuse in the block linears): the hook on hand-built inputs (a moved
// group is recomputed, a still one reused, the output equals the linear on the reference input;
// the AMX delta path equals the emulation), the counters, thresh=0 equal to the dense loop bit
// for bit, a run on the tiny model that reuses and records it, and the refusals.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "accel/kaleido.h"
#include "accel/step_method.h"
#include "accel/tiny_loop.h"
#include "core/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "support/test_support.h"

namespace vidax::accel {
namespace {

// A run whose config has one layer of dim 64 (the hook sizes its state from it).
RunInfo small_run() {
  RunInfo r;
  r.dit.dim = 64;
  r.dit.ffn_dim = 128;
  r.dit.num_heads = 1;
  r.dit.num_layers = 1;
  r.steps = 4;
  r.branches = 1;
  r.tokens = 40;
  return r;
}

Tensor random_tensor(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Tensor t = Tensor::zeros(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data<float>()[i] = d(rng);
  return t;
}

// Calls the hook for layer 0's o projection on x [rows, 64]; returns y [rows, 64].
Tensor call(wan::LinearHook& hook, const PackedLinear& lin, const Tensor& x, int64_t step) {
  Tensor y = Tensor::zeros(Shape{x.dim(0), lin.out_features()});
  wan::LinearCall c;
  c.step = step;
  c.layer = 0;
  c.site = wan::LinearSite::kO;
  c.linear = &lin;
  c.x = x.data<float>();
  c.rows = x.dim(0);
  c.y = y.mutable_data<float>();
  return hook.forward(c) ? y : lin(x);  // the block's linear_f32_in when the hook declines
}

TEST(Kaleido, StillGroupsAreReusedAndMovedOnesRecomputed) {
  const int64_t rows = 40;
  const Tensor w = random_tensor(Shape{64, 64}, 1), b = random_tensor(Shape{64}, 2);
  for (const DType compute : {DType::kF32, DType::kBF16}) {
    const PackedLinear lin(w, b, compute);
    const Tensor x1 = random_tensor(Shape{rows, 64}, 3);
    // x2: rows 0-31 move channel 5 (group 0) far; rows 32-39 move channel 40 (group 1) a little
    // (below 1 x RMS) and channel 1 far.
    Tensor x2 = x1.clone();
    float* p = x2.mutable_data<float>();
    for (int64_t r = 0; r < 32; ++r) p[r * 64 + 5] += 10.f;
    for (int64_t r = 32; r < rows; ++r) p[r * 64 + 40] += 0.01f, p[r * 64 + 1] -= 10.f;
    for (const std::string exec : {"emulate", "delta"}) {
      if (exec == "delta" && (compute != DType::kBF16 || lin.amx_weight() == nullptr)) continue;
      KaleidoOptions o;
      o.thresh = 1.0;
      o.exec = exec;
      Kaleido k(small_run(), o);
      auto hook = k.linear_hook();
      const Tensor y1 = call(*hook, lin, x1, 0);
      EXPECT_TRUE(testing::all_close(y1, lin(x1), 1e-5, 1e-5, exec + " first call"));
      const Tensor y2 = call(*hook, lin, x2, 1);
      // What was used: x2 everywhere except row 32-39's group 1 (channel 40 kept from x1).
      Tensor used = x2.clone();
      for (int64_t r = 32; r < rows; ++r)
        used.mutable_data<float>()[r * 64 + 40] = x1.data<float>()[r * 64 + 40];
      const double tol = compute == DType::kBF16 ? 1e-1 : 1e-5;  // bf16 inputs up to ~13
      EXPECT_TRUE(testing::all_close(y2, lin(used), tol, tol, exec + " second call"));
      const ReuseCounts& c = k.counts(0, wan::LinearSite::kO);
      EXPECT_EQ(c.groups, 2 * rows * 2);  // two calls x 40 rows x 2 groups
      // Second call: rows 0-31 keep group 1, rows 32-39 keep group 1 too (channel 40 moved
      // 0.01, under its RMS) and recompute group 0.
      EXPECT_EQ(c.groups_reused, 32 + 8);
      // Blocks of 32 rows: block 0 skips group 1; block 1 (rows 32-39) skips group 1.
      EXPECT_EQ(c.tiles_skipped, 2);
      EXPECT_GT(c.flops_saved, 0);
    }
  }
}

TEST(Kaleido, DeltaPathEqualsTheEmulation) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "AMX-BF16 is not usable on this machine";
  const Tensor w = random_tensor(Shape{96, 64}, 5), b = random_tensor(Shape{96}, 6);
  const PackedLinear lin(w, b, DType::kBF16, GemmEpilogue::kGeluTanh);
  ASSERT_NE(lin.amx_weight(), nullptr);
  KaleidoOptions e, d;
  e.thresh = d.thresh = 0.5;
  e.exec = "emulate";
  d.exec = "delta";
  Kaleido ke(small_run(), e), kd(small_run(), d);
  for (int64_t step = 0; step < 4; ++step) {
    Tensor x = random_tensor(Shape{70, 64}, 7);
    // Later steps move a few channels of some rows.
    for (int64_t r = 0; r < 70; r += 3) x.mutable_data<float>()[r * 64 + (r % 64)] += step;
    const Tensor ye = call(*ke.linear_hook(), lin, x, step);
    const Tensor yd = call(*kd.linear_hook(), lin, x, step);
    EXPECT_TRUE(testing::all_close(yd, ye, 5e-2, 5e-2, "step " + std::to_string(step)));
  }
  EXPECT_EQ(ke.counts(0, wan::LinearSite::kO).groups_reused,
            kd.counts(0, wan::LinearSite::kO).groups_reused);
}

TEST(Kaleido, ZeroThresholdIsTheDenseRunBitForBit) {
  VIDAX_REQUIRE_TINY_LOOP();
  const std::vector<Tensor> dense = tiny::tiny_loop_latents(nullptr, 6);
  const auto m = make_step_method("kaleido:thresh=0", tiny::tiny_run_info(6));
  const std::vector<Tensor> got = tiny::tiny_loop_latents(m.get(), 6);
  ASSERT_EQ(got.size(), dense.size());
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_EQ(std::memcmp(got[s].data<float>(), dense[s].data<float>(),
                          static_cast<size_t>(got[s].numel()) * 4),
              0);
  EXPECT_EQ(m->report().schedule_cond, "CCCCCC");
  EXPECT_DOUBLE_EQ(m->report().work_fraction, 1.0);
}

TEST(Kaleido, ReusesOnTheTinyModelAndReportsPerLayer) {
  VIDAX_REQUIRE_TINY_LOOP();
  const std::vector<Tensor> dense = tiny::tiny_loop_latents(nullptr, 8);
  const auto m = make_step_method("kaleido:thresh=2", tiny::tiny_run_info(8));
  const std::vector<Tensor> got = tiny::tiny_loop_latents(m.get(), 8);
  const StepReport r = m->report();
  EXPECT_EQ(r.schedule_cond.front(), 'C');  // the first step computes everything
  EXPECT_NE(r.schedule_cond.find('k'), std::string::npos) << r.schedule_cond;
  EXPECT_LT(r.work_fraction, 1.0);
  EXPECT_GT(r.details["reused"].get<double>(), 0.0);
  EXPECT_EQ(r.details["layers"].size(), 2u);  // the tiny DiT's two blocks
  EXPECT_TRUE(r.details["layers"][0].contains("ffn_out"));
  // An approximation of the dense run, not a different one.
  const double diff = testing::max_rel_diff(got.back(), dense.back());
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 0.5);
}

TEST(Kaleido, BadSpecsNameTheOption) {
  VIDAX_REQUIRE_TINY_LOOP();
  const auto message = tiny::spec_error;
  const RunInfo run = tiny::tiny_run_info(4);
  EXPECT_NE(message("kaleido:thresh=-1", run).find("thresh"), std::string::npos);
  EXPECT_NE(message("kaleido:exec=gpu", run).find("exec='gpu'"), std::string::npos);
  EXPECT_NE(message("kaleido:ops=qkv/mlp", run).find("unknown linear 'mlp'"), std::string::npos);
  RunInfo mesh = run;
  mesh.cfg_parallel = 2;
  EXPECT_NE(message("kaleido", mesh).find("one process"), std::string::npos);
  EXPECT_EQ(make_step_method("kaleido:ops=ffn_in/ffn_out,thresh=0.1", run)->name(),
            "kaleido:thresh=0.1,ops=ffn_in/ffn_out");
}

}  // namespace
}  // namespace vidax::accel
