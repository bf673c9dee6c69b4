// HSA (heterogeneous step allocation): the dense and sync steps, the active set (highest
// relative velocity change, the starvation guard), inactive tokens advancing with their cached
// velocity, budget 1 equal to the dense Euler loop bit for bit, a partial run on the tiny model
// (fewer FLOPs, the schedule recorded), and the refusals.
#include <string>
#include <vector>

#include "accel/hsa.h"
#include "accel/step_method.h"
#include "accel/tiny_loop.h"
#include "core/error.h"
#include "nn/patchify.h"
#include "pipeline/denoise.h"
#include "sampling/scheduler.h"
#include "support/test_support.h"

namespace vidax::accel {
namespace {

using testing::all_close;

// A run of 4 tokens: a [2, 1, 2, 8] latent with patch (1, 2, 2) is a (1, 1, 4) grid, 4 tokens of
// 2 x 4 = 8 values.
RunInfo tiny_run(int steps) {
  RunInfo r;
  r.dit.in_dim = r.dit.out_dim = 2;
  r.dit.dim = 128, r.dit.num_heads = 1, r.dit.num_layers = 1, r.dit.ffn_dim = 128;
  r.steps = steps;
  r.branches = 2;
  r.tokens = 4;
  r.sampler = "euler";
  return r;
}

// A prediction whose token j holds the value v[j] everywhere.
Tensor prediction_of(const std::vector<float>& v) {
  Tensor rows = Tensor::zeros(Shape{4, 8});
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t c = 0; c < 8; ++c)
      rows.mutable_data<float>()[j * 8 + c] = v[static_cast<size_t>(j)];
  return unpatchify(rows, 2, {1, 1, 4}, {1, 2, 2});
}

std::vector<float> token_values(const Tensor& pred) {
  const Tensor rows = patchify(pred, {1, 2, 2});
  std::vector<float> v;
  for (int64_t j = 0; j < 4; ++j) v.push_back(rows.data<float>()[j * 8]);
  return v;
}

TEST(Hsa, DenseStepsAreTheWarmupTheSyncStepsAndTheLast) {
  Hsa h(tiny_run(20), 0.5, 3, {0.4, 0.73}, 0.1);
  std::string dense;
  for (int s = 0; s < 20; ++s) dense.push_back(h.dense_step(s) ? 'D' : '.');
  EXPECT_EQ(dense, "DDD.....D......D...D");  // 0-2, round(8.0) = 8, round(14.6) = 15, 19
  Hsa all(tiny_run(20), 1.0, 3, {}, 0.1);
  for (int s = 0; s < 20; ++s) EXPECT_TRUE(all.dense_step(s));
}

TEST(Hsa, ActiveTokensChangeMostAndIdleOnesKeepTheirVelocity) {
  Hsa h(tiny_run(10), 0.5, 2, {}, 0.0);  // gamma 0: no starvation guard
  // Steps 0 and 1 are dense: velocities 1, 2, 3, 4 then 1, 2, 6, 8 -> relative changes
  // 0, 0, 0.5, 0.5: tokens 2 and 3 are the active half.
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(h.active_tokens(s), nullptr);
    Tensor p =
        prediction_of(s == 0 ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{1, 2, 6, 8});
    h.complete_prediction(s, p);
  }
  const std::vector<int64_t>* active = h.active_tokens(2);
  ASSERT_NE(active, nullptr);
  EXPECT_EQ(*active, (std::vector<int64_t>{2, 3}));
  // The model computed tokens 2 and 3 (rows of the others are 0): tokens 0 and 1 take their
  // last velocities, 1 and 2.
  Tensor p = prediction_of({0, 0, 7, 9});
  h.complete_prediction(2, p);
  EXPECT_EQ(token_values(p), (std::vector<float>{1, 2, 7, 9}));
  const StepReport r = h.report();
  EXPECT_EQ(r.schedule_cond.substr(0, 3), "CCp");
  EXPECT_LT(r.work_fraction, 1.0);
}

TEST(Hsa, TheStarvationGuardBringsIdleTokensBack) {
  Hsa h(tiny_run(20), 0.25, 2, {}, 5.0);  // one token per step, a strong guard
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(h.active_tokens(s), nullptr);
    Tensor p = prediction_of(s == 0 ? std::vector<float>{1, 1, 1, 1}
                                    : std::vector<float>{1.1f, 1.2f, 1.3f, 1.4f});
    h.complete_prediction(s, p);
  }
  // Token 3 changed most; once it ran (idle 0) the others have waited a step: exp(5) wins.
  std::vector<int64_t> chosen;
  for (int s = 2; s < 6; ++s) {
    const auto* active = h.active_tokens(s);
    ASSERT_NE(active, nullptr);
    ASSERT_EQ(active->size(), 1u);
    chosen.push_back(active->front());
    Tensor p = prediction_of({1, 1, 1, 1});
    h.complete_prediction(s, p);
  }
  std::sort(chosen.begin(), chosen.end());
  EXPECT_EQ(chosen, (std::vector<int64_t>{0, 1, 2, 3}));  // every token got its turn
}

TEST(Hsa, SpecsAndRefusals) {
  const RunInfo run = tiny_run(10);
  EXPECT_EQ(make_step_method("hsa", run)->name(),
            "hsa:budget=0.5,warmup=5,sync=0.4/0.73,gamma=0.1");
  EXPECT_EQ(make_step_method("hsa:budget=0.25,sync=none", run)->name(),
            "hsa:budget=0.25,warmup=5,sync=none,gamma=0.1");
  auto message = [&](const std::string& spec, RunInfo r) {
    try {
      make_step_method(spec, r);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  RunInfo unipc = run;
  unipc.sampler = "unipc";
  EXPECT_NE(message("hsa", unipc).find("needs --sampler euler"), std::string::npos);
  RunInfo ulysses = run;
  ulysses.sequence_parallel = 2;
  EXPECT_NE(message("hsa", ulysses).find("--mesh cfg=2"), std::string::npos);
  EXPECT_NE(message("hsa:budget=0", run).find("budget"), std::string::npos);
  EXPECT_NE(message("hsa:budget=1.5", run).find("budget"), std::string::npos);
  EXPECT_NE(message("hsa:warmup=1", run).find("warmup"), std::string::npos);
  EXPECT_NE(message("hsa:sync=0.4/2", run).find("sync"), std::string::npos);
}

Tensor difference(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::zeros(a.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    out.mutable_data<float>()[i] = a.data<float>()[i] - b.data<float>()[i];
  return out;
}

std::vector<Tensor> euler_loop(StepMethod* method, int steps) {
  return tiny::tiny_loop_latents(method, steps, "euler");
}

RunInfo tiny_dit_run(int steps) { return tiny::tiny_run_info(steps, "euler"); }

TEST(Hsa, BudgetOneIsTheDenseEulerLoopBitForBit) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const std::vector<Tensor> dense = euler_loop(nullptr, 8);
  auto method = make_step_method("hsa:budget=1,warmup=2", tiny_dit_run(8));
  const std::vector<Tensor> got = euler_loop(method.get(), 8);
  ASSERT_EQ(got.size(), dense.size());
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_TRUE(all_close(got[s], dense[s], 0, 0, "step " + std::to_string(s)));
  EXPECT_EQ(method->report().schedule_cond, "CCCCCCCC");
}

TEST(Hsa, InactiveTokensAdvanceWithTheirCachedVelocity) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const std::vector<Tensor> dense = euler_loop(nullptr, 8);
  // Record each step's active set along the run.
  class Recording : public Hsa {
   public:
    using Hsa::Hsa;
    const std::vector<int64_t>* active_tokens(int step) override {
      const auto* a = Hsa::active_tokens(step);
      sets.push_back(a != nullptr ? *a : std::vector<int64_t>());
      return a;
    }
    std::vector<std::vector<int64_t>> sets;
  };
  Recording method(tiny_dit_run(8), 0.5, 2, {}, 0.1);
  const std::vector<Tensor> got = euler_loop(&method, 8);
  const StepReport r = method.report();
  EXPECT_EQ(r.schedule_cond, "CCpppppC");
  EXPECT_EQ(r.schedule_uncond, r.schedule_cond);
  EXPECT_LT(r.work_fraction, 0.85);  // 5 of 8 steps on 9 of 18 tokens
  EXPECT_GT(r.work_fraction, 0.5);
  EXPECT_TRUE(all_close(got[1], dense[1], 0, 0, "the dense warmup"));
  // Euler: x_{i+1} = x_i + (s_{i+1} - s_i) v. A token inactive at step i reuses the velocity of
  // step i - 1 when it ran there: its change is the previous one scaled by the sigma ratio.
  auto sched = make_scheduler("euler", 8, 5.0);
  const std::vector<float>& sigma = sched->sigmas();
  int checked = 0;
  for (int i = 2; i < 7; ++i) {
    const auto& now = method.sets[static_cast<size_t>(i)];
    const Tensor d_now = patchify(
        difference(got[static_cast<size_t>(i)], got[static_cast<size_t>(i - 1)]), {1, 2, 2});
    const Tensor d_before = patchify(
        difference(got[static_cast<size_t>(i - 1)], got[static_cast<size_t>(i - 2)]), {1, 2, 2});
    const double ratio =
        (static_cast<double>(sigma[static_cast<size_t>(i + 1)]) - sigma[static_cast<size_t>(i)]) /
        (static_cast<double>(sigma[static_cast<size_t>(i)]) - sigma[static_cast<size_t>(i - 1)]);
    for (int64_t j = 0; j < 18; ++j) {
      // Active now: a fresh velocity. Inactive: the one of its last run (step i - 1, or earlier
      // when it was idle then too, which step i - 1 also used).
      if (std::find(now.begin(), now.end(), j) != now.end()) continue;
      for (int64_t c = 0; c < d_now.dim(1); ++c) {
        const double a = d_now.data<float>()[j * d_now.dim(1) + c];
        const double b = d_before.data<float>()[j * d_now.dim(1) + c];
        EXPECT_NEAR(a, b * ratio, 1e-5 * (1 + std::abs(a))) << "step " << i << " token " << j;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

}  // namespace
}  // namespace vidax::accel
