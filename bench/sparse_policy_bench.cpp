// Time of one plan() (mask construction, estimators included) of each learned policy at Wan 2.1
// 1.3B head shapes (12 heads x 128) on random post-RoPE q/k: 8,190 tokens (21 x 15 x 26) and
// 32,760 tokens (21 x 30 x 52). Compare against the sparse attention time of the same layer
// (vidax bench attention) for the "mask construction <= 5%" budget.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sparse/spade_policy.h"
#include "sparse/svg_policy.h"
#include "sparse/west_policy.h"

namespace vidax::sparse {
namespace {

struct Inputs {
  std::vector<float> q, k;
  AttentionCall call;
  explicit Inputs(TokenGrid g) {
    const auto n = static_cast<size_t>(g.tokens() * 12 * 128);
    q.resize(n);
    k.resize(n);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    for (auto& v : q) v = nd(rng);
    for (auto& v : k) v = nd(rng);
    call.grid = g;
    call.heads = 12;
    call.head_dim = 128;
    call.stride = 12 * 128;
    call.q = q.data();
    call.k = k.data();
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
BENCHMARK(BM_SvgPlan)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

void BM_SpadePlan(benchmark::State& state) {
  Inputs in(grid_of(state.range(0)));
  SpadePolicy p(parse_spade_options(""));
  for (auto _ : state) benchmark::DoNotOptimize(p.plan(in.call));
  state.counters["tokens"] = static_cast<double>(in.call.grid.tokens());
}
BENCHMARK(BM_SpadePlan)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

void BM_WestPlan(benchmark::State& state) {
  Inputs in(grid_of(state.range(0)));
  WestPrior prior;
  prior.layers = 30;
  prior.heads = 12;
  const int64_t c = prior.cells();
  prior.mass.assign(static_cast<size_t>(30 * 12 * c * c), 1.0f / static_cast<float>(c));
  WestOptions o;
  o.density = 0.1;
  WestPolicy p(o, prior);
  for (auto _ : state) {
    // A fresh policy each time would time the load; the per-(grid, layer) plan cache makes
    // every call after the first a copy, so time the first plan of each layer.
    in.call.layer = (in.call.layer + 1) % 30;
    WestPolicy fresh(o, prior);
    benchmark::DoNotOptimize(fresh.plan(in.call));
  }
  state.counters["tokens"] = static_cast<double>(in.call.grid.tokens());
}
BENCHMARK(BM_WestPlan)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace
}  // namespace vidax::sparse
