// Time of one plan() (mask construction, estimators included) of each learned policy at Wan 2.1
// 1.3B head shapes (12 heads x 128) on random post-RoPE q/k: 8,190 tokens (21 x 15 x 26) and
// 32,760 tokens (21 x 30 x 52). Compare against the sparse attention time of the same layer
// (vidax bench attention) for the "mask construction <= 5%" budget.
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/buffer.h"
#include "core/convert.h"
#include "core/tensor.h"
#include "kernels/cpu/flash_attention.h"
#include "sparse/spade_policy.h"
#include "sparse/svg_policy.h"
#include "sparse/west_policy.h"

namespace vidax::sparse {
namespace {

// q/k and their bf16 copies, as the DiT passes them in bf16 mode (its default).
struct Inputs {
  Buffer<float> q, k;  // huge pages, as the DiT's activations
  Buffer<BFloat16> q16, k16;
  AttentionCall call;
  explicit Inputs(TokenGrid g) {
    const auto n = static_cast<size_t>(g.tokens() * 12 * 128);
    q.resize(n);
    k.resize(n);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    for (size_t i = 0; i < n; ++i) q.data()[i] = nd(rng);
    for (size_t i = 0; i < n; ++i) k.data()[i] = nd(rng);
    q16.resize(n);
    k16.resize(n);
    convert_floats(q.data(), DType::kF32, q16.data(), DType::kBF16, n);
    convert_floats(k.data(), DType::kF32, k16.data(), DType::kBF16, n);
    call.grid = g;
    call.heads = 12;
    call.head_dim = 128;
    call.stride = 12 * 128;
    call.q = q.data();
    call.k = k.data();
    call.q16 = q16.data();
    call.k16 = k16.data();
    call.layers = 30;
    call.layer = 10;
    call.steps = 50;
    call.step = 25;
  }
};

TokenGrid grid_of(int64_t arg) { return arg == 0 ? TokenGrid{21, 15, 26} : TokenGrid{21, 30, 52}; }

void BM_SvgPlan(benchmark::State& state) {
  Inputs in(grid_of(state.range(0)));
  SvgPolicy p(parse_svg_options("density=0.1"));
  for (auto _ : state) benchmark::DoNotOptimize(p.plan(in.call));
  state.counters["tokens"] = static_cast<double>(in.call.grid.tokens());
}
BENCHMARK(BM_SvgPlan)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_SpadePlan(benchmark::State& state) {
  Inputs in(grid_of(state.range(0)));
  const char* options[] = {"", "topk=67", "topk=67,shape_every=1000"};
  SpadePolicy p(parse_spade_options(options[state.range(1)]));
  for (auto _ : state) benchmark::DoNotOptimize(p.plan(in.call));
  state.counters["tokens"] = static_cast<double>(in.call.grid.tokens());
}
// Args: grid (0: 8,190 tokens, 1: 32,760), options (0: the defaults, top-p 0.9; 1: top-k 67,
// ~13% density at 32,760 tokens; 2: the same with shapes kept after the first call, so the
// timed calls run only the chosen shapes' query sums, the key pass and the selection).
BENCHMARK(BM_SpadePlan)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 2})
    ->Args({1, 2})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

WestPrior uniform_prior() {
  WestPrior prior;
  prior.layers = 30;
  prior.heads = 12;
  const int64_t c = prior.cells();
  prior.mass.assign(static_cast<size_t>(30 * 12 * c * c), 1.0f / static_cast<float>(c));
  return prior;
}

// FAST's selection at load (global density threshold over 30 layers x 12 heads x 64^2 cells).
void BM_WestLoad(benchmark::State& state) {
  const WestPrior prior = uniform_prior();
  WestOptions o;
  o.density = 0.1;
  for (auto _ : state) {
    WestPolicy p(o, prior);
    benchmark::DoNotOptimize(p.head_density(0, 0));
  }
}
BENCHMARK(BM_WestLoad)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// The first plan() of a layer (later calls of the layer at the same grid hit the plan cache).
void BM_WestPlan(benchmark::State& state) {
  Inputs in(grid_of(state.range(0)));
  WestOptions o;
  o.density = 0.1;
  const WestPrior prior = uniform_prior();
  std::unique_ptr<WestPolicy> p;
  for (auto _ : state) {
    if (in.call.layer == 0 || !p) {
      state.PauseTiming();
      p = std::make_unique<WestPolicy>(o, prior);
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(p->plan(in.call));
    in.call.layer = (in.call.layer + 1) % 30;
  }
  state.counters["tokens"] = static_cast<double>(in.call.grid.tokens());
}
BENCHMARK(BM_WestPlan)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The peer: the dense bf16 self-attention of the same layer (AMX where present), so the plan
// cost can be read as a share of what a sparse layer at density d costs (~d x this).
void BM_DenseAttentionBf16(benchmark::State& state) {
  Inputs in(grid_of(state.range(0)));
  const int64_t n = in.call.grid.tokens(), row = 12 * 128;
  std::vector<BFloat16> q(in.q.size()), k(in.k.size());
  for (size_t i = 0; i < q.size(); ++i) q[i].bits = f32_to_bf16(in.q.data()[i]);
  for (size_t i = 0; i < k.size(); ++i) k[i].bits = f32_to_bf16(in.k.data()[i]);
  std::vector<float> out(static_cast<size_t>(n * row));
  const AttentionDims d{n, n, n, 12, 128, row, row, row, row, 1.0f / std::sqrt(128.0f)};
  for (auto _ : state) flash_attention(q.data(), k.data(), k.data(), out.data(), d);
  state.counters["tokens"] = static_cast<double>(n);
}
BENCHMARK(BM_DenseAttentionBf16)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace
}  // namespace vidax::sparse
