// TeaCache, EasyCache and MagCache against their public reference implementations
// (tests/data/accel, made by running each reference forward on the official Wan2.1 model with
// the shared tiny weights in the text2video loop): the same decisions on every call and the
// same latent after every step. A method that never skips equals the dense loop bit for bit.
#include <string>
#include <vector>

#include "accel/easycache.h"
#include "accel/magcache.h"
#include "accel/step_method.h"
#include "accel/teacache.h"
#include "accel/tiny_loop.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace vidax::accel {
namespace {

using testing::all_close;

const SafetensorsFile& reference() {
  static const SafetensorsFile f = SafetensorsFile::open(
      std::string(VIDAX_SOURCE_DIR) + "/tests/data/accel/step_methods_ref.safetensors");
  return f;
}

RunInfo run_info(int steps) { return tiny::tiny_run_info(steps); }

// The text2video loop with `method` (null: dense): the latent after every step.
std::vector<Tensor> run_loop(StepMethod* method, int steps) {
  return tiny::tiny_loop_latents(method, steps);
}

// "1" / "0" per call (cond, uncond interleaved) from the report, as the reference stores it.
std::vector<int64_t> ran_per_call(const StepReport& r) {
  std::vector<int64_t> ran;
  for (size_t s = 0; s < r.schedule_cond.size(); ++s) {
    ran.push_back(r.schedule_cond[s] == 'C' ? 1 : 0);
    ran.push_back(r.schedule_uncond[s] == 'C' ? 1 : 0);
  }
  return ran;
}

// The fixture's per-call numbers (F32).
double f64(const Tensor& t, size_t i) { return static_cast<double>(t.data<float>()[i]); }

std::vector<int64_t> ints(const Tensor& t) {
  return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
}

void expect_same_latents(const std::vector<Tensor>& got, const std::string& name) {
  const Tensor ref = reference().tensor(name + ".latents");  // [steps, 16, 3, 4, 6]
  ASSERT_EQ(static_cast<int64_t>(got.size()), ref.dim(0)) << name;
  for (int64_t s = 0; s < ref.dim(0); ++s)
    EXPECT_TRUE(all_close(got[static_cast<size_t>(s)], ref.select(0, s), 1e-4, 1e-4,
                          name + " step " + std::to_string(s)));
}

struct TeaCase {
  const char* mode;
  const char* coeffs;  // "t2v-1.3b" or "identity"
  const char* thresh;  // as in the fixture's names
};

class TeaCacheReference : public ::testing::TestWithParam<TeaCase> {};

TEST_P(TeaCacheReference, SameDecisionsAndLatentsAsTheReference) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const TeaCase c = GetParam();
  const std::string name = std::string("teacache.") + c.mode + "." + c.coeffs + "." + c.thresh;
  const std::string spec =
      std::string("teacache:thresh=") + c.thresh + ",mode=" + c.mode +
      (std::string(c.coeffs) == "identity" ? ",coeffs=0/0/0/1/0" : ",model=t2v-1.3b");
  auto method = make_step_method(spec, run_info(10));
  const std::vector<Tensor> latents = run_loop(method.get(), 10);
  EXPECT_EQ(ran_per_call(method->report()), ints(reference().tensor(name + ".ran"))) << name;
  // The compared distances, call by call.
  const auto& decisions = dynamic_cast<TeaCache&>(*method).decisions();
  const Tensor acc = reference().tensor(name + ".acc"), rel = reference().tensor(name + ".rel_l1");
  ASSERT_EQ(static_cast<int64_t>(decisions.size()), acc.numel());
  for (size_t i = 0; i < decisions.size(); ++i) {
    const double ref_acc = f64(acc, i), ref_rel = f64(rel, i);
    EXPECT_NEAR(decisions[i].acc, ref_acc, 1e-5 * std::max(1.0, std::abs(ref_acc)))
        << name << " call " << i;
    EXPECT_NEAR(decisions[i].rel_l1, ref_rel, 1e-5) << name << " call " << i;
  }
  expect_same_latents(latents, name);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TeaCacheReference,
    ::testing::Values(TeaCase{"e", "identity", "0"}, TeaCase{"e", "identity", "2"},
                      TeaCase{"e", "identity", "1e+09"}, TeaCase{"e0", "identity", "0"},
                      TeaCase{"e0", "identity", "2"}, TeaCase{"e0", "identity", "1e+09"},
                      TeaCase{"e", "t2v-1.3b", "0"}, TeaCase{"e", "t2v-1.3b", "3000"},
                      TeaCase{"e", "t2v-1.3b", "1e+09"}, TeaCase{"e0", "t2v-1.3b", "0"},
                      TeaCase{"e0", "t2v-1.3b", "1e+09"}),
    [](const ::testing::TestParamInfo<TeaCase>& info) {
      std::string n =
          std::string(info.param.mode) + "_" + info.param.coeffs + "_" + info.param.thresh;
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(EasyCacheReference, SameDecisionsRatesAndLatentsAsTheReference) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  for (const char* thresh : {"0.05", "1", "1e+09"}) {
    const std::string name = std::string("easycache.") + thresh;
    auto method = make_step_method(std::string("easycache:thresh=") + thresh, run_info(20));
    const std::vector<Tensor> latents = run_loop(method.get(), 20);
    EXPECT_EQ(ran_per_call(method->report()), ints(reference().tensor(name + ".ran"))) << name;
    const auto& decisions = dynamic_cast<EasyCache&>(*method).decisions();
    const Tensor acc = reference().tensor(name + ".acc");
    ASSERT_EQ(static_cast<int64_t>(decisions.size()), acc.numel());
    for (size_t i = 0; i < decisions.size(); ++i)
      EXPECT_NEAR(decisions[i].acc, f64(acc, i), 1e-4 * std::max(1.0, std::abs(f64(acc, i))))
          << name << " step " << i;
    expect_same_latents(latents, name);
  }
}

TEST(MagCacheReference, SameScheduleAndLatentsAsTheReference) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  for (const auto& [thresh, k] : {std::pair{"0.12", 2}, std::pair{"0.5", 4}}) {
    const std::string name = std::string("magcache.") + thresh + "." + std::to_string(k);
    auto method = make_step_method(
        std::string("magcache:thresh=") + thresh + ",k=" + std::to_string(k) + ",model=t2v-1.3b",
        run_info(10));
    const std::vector<Tensor> latents = run_loop(method.get(), 10);
    const auto ran = ints(reference().tensor(name + ".ran"));
    EXPECT_EQ(ran_per_call(method->report()), ran) << name;
    // The schedule is known before running.
    const auto planned = method->planned_blocks();
    ASSERT_TRUE(planned.has_value());
    for (size_t s = 0; s < planned->size(); ++s)
      for (size_t b = 0; b < 2; ++b)
        EXPECT_EQ((*planned)[s][b] ? 1 : 0, ran[2 * s + b]) << name << " step " << s;
    expect_same_latents(latents, name);
  }
}

TEST(StepMethods, NeverSkippingEqualsTheDenseLoopBitForBit) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const std::vector<Tensor> dense = run_loop(nullptr, 10);
  for (const char* spec : {"teacache:thresh=0,coeffs=0/0/0/1/0", "easycache:thresh=0",
                           "magcache:thresh=0,model=t2v-1.3b"}) {
    auto method = make_step_method(spec, run_info(10));
    const std::vector<Tensor> got = run_loop(method.get(), 10);
    ASSERT_EQ(got.size(), dense.size());
    for (size_t s = 0; s < got.size(); ++s)
      EXPECT_TRUE(
          all_close(got[s], dense[s], 0, 0, std::string(spec) + " step " + std::to_string(s)));
    const StepReport r = method->report();
    EXPECT_EQ(r.model_calls, 20) << spec;
    EXPECT_EQ(r.block_stack_runs, 20) << spec;
    EXPECT_DOUBLE_EQ(r.work_fraction, 1.0) << spec;
  }
}

}  // namespace
}  // namespace vidax::accel
