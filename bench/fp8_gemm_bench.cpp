// fp8 weights kept fp8 (PackedLinear::kept: on AMX widened per panel chunk inside the kernel,
// scale in its epilogue; elsewhere widened per call, scale after the GEMM) against the same
// weights converted to bf16 at load (PackedLinear, bf16), at Wan FFN shapes with 1,950 rows (17
// frames 416x240) and with a few rows. The difference is the widening of the codes.
//   OMP_NUM_THREADS=2 vidax_microbench --benchmark_filter=Fp8 --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/cpu/gemm.h"

namespace vidax {
namespace {

struct Fp8Inputs {
  std::vector<BFloat16> x;
  std::unique_ptr<PackedLinear> kept, converted;
};

const Fp8Inputs& fp8_inputs(int64_t m, int64_t k, int64_t n) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<Fp8Inputs>> cache;
  auto& slot = cache[{m, k, n}];
  if (!slot) {
    slot = std::make_unique<Fp8Inputs>();
    std::mt19937 gen(static_cast<uint32_t>(m + k + n));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    slot->x.resize(static_cast<size_t>(m * k));
    for (auto& v : slot->x) v.bits = f32_to_bf16(dist(gen));
    Tensor codes = Tensor::zeros(Shape{n, k}, DType::kF8E4M3);
    Tensor w = Tensor::zeros(Shape{n, k}, DType::kF32);
    auto* c = static_cast<uint8_t*>(codes.raw_mutable_data());
    const float scale = 0.001f;
    for (int64_t i = 0; i < n * k; ++i) {
      c[i] = f32_to_f8e4m3(dist(gen) * 30.0f);
      w.mutable_data<float>()[i] = f8e4m3_to_f32(c[i]) * scale;
    }
    slot->kept = std::make_unique<PackedLinear>(PackedLinear::kept(
        codes, std::vector<float>(static_cast<size_t>(n), scale), Tensor(), DType::kBF16));
    slot->converted = std::make_unique<PackedLinear>(w, Tensor(), DType::kBF16);
  }
  return *slot;
}

// Args: m, k, n, kept (1) or converted (0).
void Fp8Linear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Fp8Inputs& in = fp8_inputs(m, k, n);
  const PackedLinear& lin = state.range(3) != 0 ? *in.kept : *in.converted;
  std::vector<float> y(static_cast<size_t>(m * n));
  for (auto _ : state) lin.forward(in.x.data(), m, y.data());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(Fp8Linear)
    ->ArgNames({"m", "k", "n", "kept"})
    ->Args({1950, 1536, 8960, 0})
    ->Args({1950, 1536, 8960, 1})
    ->Args({1950, 5120, 13824, 0})
    ->Args({1950, 5120, 13824, 1})
    ->Args({64, 5120, 13824, 0})
    ->Args({64, 5120, 13824, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace vidax
