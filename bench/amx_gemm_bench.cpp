// bf16 GEMM throughput at the Wan 2.1 1.3B DiT shapes (1,950 tokens): oneDNN through
// PackedLinear (DType::kBF16, VIDAX_GEMM=onednn forced) against our AMX kernel
// (amx_gemm_bf16), same inputs. y[M, N] = x[M, K] W[N, K]^T + bias; GFLOP/s = 2 M N K / time.
// Compare medians of interleaved repetitions:
//   OMP_NUM_THREADS=2 vidax_microbench --benchmark_filter=Gemm --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true
// VIDAX_GEMM_BENCH_EXTRA=1 adds ffn_in without GELU and with f32 output (epilogue cost).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"

namespace vidax {
namespace {

enum class Impl { kOneDnn, kAmx };

struct Inputs {
  std::vector<BFloat16> x;
  Tensor w, b;
};

const Inputs& inputs(int64_t m, int64_t k, int64_t n) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<Inputs>> cache;
  auto& slot = cache[{m, k, n}];
  if (!slot) {
    slot = std::make_unique<Inputs>();
    std::mt19937 gen(static_cast<uint32_t>(m * 31 + k * 7 + n));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    slot->x.resize(static_cast<size_t>(m * k));
    for (auto& v : slot->x) v.bits = f32_to_bf16(dist(gen));
    slot->w = Tensor::zeros(Shape{n, k}, DType::kBF16);
    auto* wp = slot->w.mutable_data<BFloat16>();
    for (int64_t i = 0; i < n * k; ++i) wp[i].bits = f32_to_bf16(dist(gen) * 0.03f);
    slot->b = Tensor::zeros(Shape{n}, DType::kF32);
    float* bp = slot->b.mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) bp[i] = dist(gen) * 0.1f;
  }
  return *slot;
}

// Args: m, k, n, epilogue (0 none, 1 gelu_tanh), bf16 output (0/1).
void run_gemm(benchmark::State& state, Impl impl) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const GemmEpilogue ep = state.range(3) != 0 ? GemmEpilogue::kGeluTanh : GemmEpilogue::kNone;
  const bool bf16_out = state.range(4) != 0;
  if (impl == Impl::kAmx && !amx_bf16_usable()) {
    state.SkipWithError("AMX-BF16 not usable");
    return;
  }
  const Inputs& in = inputs(m, k, n);
  std::vector<float> y(static_cast<size_t>(m * n));
  std::vector<BFloat16> yb(static_cast<size_t>(m * n));
  // Weights packed once per benchmark instance (not timed), as at model load.
  std::unique_ptr<PackedLinear> lin;
  std::unique_ptr<AmxPackedWeight> amx;
  if (impl == Impl::kOneDnn) {
    // PackedLinear runs our AMX kernel by default where AMX is usable; force oneDNN.
    const char* prev = std::getenv("VIDAX_GEMM");
    const std::string saved = prev != nullptr ? prev : "";
    setenv("VIDAX_GEMM", "onednn", 1);
    lin = std::make_unique<PackedLinear>(in.w, in.b, DType::kBF16, ep);
    if (prev != nullptr) {
      setenv("VIDAX_GEMM", saved.c_str(), 1);
    } else {
      unsetenv("VIDAX_GEMM");
    }
  } else {
    amx = std::make_unique<AmxPackedWeight>(in.w, in.b);
  }
  auto call = [&] {
    if (impl == Impl::kOneDnn) {
      if (bf16_out) {
        lin->forward_bf16_out(in.x.data(), m, yb.data());
      } else {
        lin->forward(in.x.data(), m, y.data());
      }
    } else if (bf16_out) {
      amx_gemm_bf16(in.x.data(), m, k, *amx, yb.data(), ep);
    } else {
      amx_gemm_bf16(in.x.data(), m, k, *amx, y.data(), ep);
    }
  };
  call();  // warm-up: primitive creation, first touch
  for (auto _ : state) {
    call();
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// The DiT shapes: qkv, o (and cross-attention q), ffn_in (+GELU, bf16 out), ffn_out, text kv.
void dit_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "k", "n", "gelu", "bf16out"});
  b->Args({1950, 1536, 4608, 0, 0});
  b->Args({1950, 1536, 1536, 0, 0});
  b->Args({1950, 1536, 8960, 1, 1});
  b->Args({1950, 8960, 1536, 0, 0});
  b->Args({512, 1536, 3072, 0, 0});
  if (const char* e = std::getenv("VIDAX_GEMM_BENCH_EXTRA"); e != nullptr && *e == '1') {
    b->Args({1950, 1536, 8960, 0, 0});  // ffn_in without the epilogue / with f32 output
    b->Args({1950, 1536, 8960, 0, 1});
    b->Args({1950, 1536, 8960, 1, 0});
  }
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
  b->MinTime(0.5);
}

void BM_Gemm_OneDnn(benchmark::State& s) { run_gemm(s, Impl::kOneDnn); }
void BM_Gemm_Amx(benchmark::State& s) { run_gemm(s, Impl::kAmx); }
BENCHMARK(BM_Gemm_OneDnn)->Apply(dit_shapes);
BENCHMARK(BM_Gemm_Amx)->Apply(dit_shapes);

}  // namespace
}  // namespace vidax

namespace vidax {
namespace {

// Packing one weight into the AMX panel layout, as every load (and every block a weights budget
// or --weights sharded brings in) does: bf16 [N, K] at the Wan 1.3B FFN-in and q|k|v shapes.
void BM_AmxPack(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1);
  std::vector<BFloat16> w(static_cast<size_t>(n * k));
  for (size_t i = 0; i < w.size(); ++i) w[i].bits = static_cast<uint16_t>(0x3f80 + (i % 97));
  for (auto _ : state) {
    const AmxPackedWeight packed(w.data(), n, k, nullptr);
    benchmark::DoNotOptimize(packed.panel(0));
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n * k * 2),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_AmxPack)
    ->ArgNames({"n", "k"})
    ->Args({8960, 1536})
    ->Args({4608, 1536})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace vidax
