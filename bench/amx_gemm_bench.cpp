// bf16 GEMM throughput at the Wan 2.1 1.3B DiT shapes (1,950 tokens): oneDNN through
// PackedLinear (DType::kBF16, VIDAX_GEMM=onednn forced) against our AMX kernel
// (amx_gemm_bf16), same inputs. y[M, N] = x[M, K] W[N, K]^T + bias; GFLOP/s = 2 M N K / time.
// Compare medians of interleaved repetitions:
//   OMP_NUM_THREADS=2 vidax_microbench --benchmark_filter=Gemm --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true
// VIDAX_GEMM_BENCH_EXTRA=1 adds ffn_in without GELU and with f32 output (epilogue cost).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/amx_reuse_gemm.h"
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

// Kaleido's fused reuse kernel (amx_gemm_bf16_reuse) at the same shapes, against BM_Gemm_Amx in
// the same run. Args: m, k, n, gelu, bf16 output, and the share of (32-row block, channel group)
// pairs whose rows move at every call, in percent (100: nothing reused, the method's pure
// overhead; 0: everything reused, only the kept product is read and the output written). Two
// inputs that differ in those pairs alternate, so every call does the same work.
void BM_AmxReuse(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const GemmEpilogue ep = state.range(3) != 0 ? GemmEpilogue::kGeluTanh : GemmEpilogue::kNone;
  const bool bf16_out = state.range(4) != 0;
  const int64_t moving = state.range(5);
  if (!amx_bf16_usable()) {
    state.SkipWithError("AMX-BF16 not usable");
    return;
  }
  const Inputs& in = inputs(m, k, n);
  const AmxPackedWeight w(in.w, in.b);
  std::vector<BFloat16> xb = in.x;
  const int64_t groups = (k + 31) / 32;
  for (int64_t b = 0; b < (m + 31) / 32; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      if ((b * groups + g) * 7919 % 100 >= moving) continue;  // a fixed spread of the pairs
      for (int64_t r = b * 32; r < std::min(m, b * 32 + 32); ++r)
        for (int64_t c = g * 32; c < std::min(k, g * 32 + 32); ++c) {
          BFloat16& v = xb[static_cast<size_t>(r * k + c)];
          v.bits = f32_to_bf16(bf16_to_f32(v.bits) + 1.f);
        }
    }
  std::vector<BFloat16> ref(static_cast<size_t>(m * k));
  Buffer<float> kept(static_cast<size_t>(amx_reuse_kept_elements(m, w)));
  std::fill(kept.data(), kept.data() + amx_reuse_kept_elements(m, w), 0.f);
  std::vector<float> sumsq(static_cast<size_t>(k)), limit(static_cast<size_t>(k), 0.1f),
      y(static_cast<size_t>(m * n));
  std::vector<BFloat16> yb(static_cast<size_t>(m * n));
  AmxReuseState st;
  st.ref = ref.data();
  st.kept = kept.data();
  st.sumsq = sumsq.data();
  st.limit = limit.data();
  AmxReuseOutput out;
  if (bf16_out)
    out.bf16 = yb.data();
  else
    out.f32 = y.data();
  st.first = true;
  amx_gemm_bf16_reuse(in.x.data(), m, k, w, ep, st, out);
  st.first = false;
  int64_t calls = 0;
  AmxReuseCounts last;
  for (auto _ : state) {
    last = amx_gemm_bf16_reuse(calls++ % 2 == 0 ? xb.data() : in.x.data(), m, k, w, ep, st, out);
    benchmark::ClobberMemory();
  }
  const double blocks = static_cast<double>((m + 31) / 32 * groups);
  state.counters["skipped"] = static_cast<double>(last.steps_skipped) / blocks;
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void reuse_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "k", "n", "gelu", "bf16out", "moving"});
  for (const int64_t moving : {100, 50, 0}) {
    b->Args({1950, 1536, 4608, 0, 0, moving});
    b->Args({1950, 1536, 8960, 1, 1, moving});
    b->Args({1950, 8960, 1536, 0, 0, moving});
  }
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
  b->MinTime(0.5);
}
BENCHMARK(BM_AmxReuse)->Apply(reuse_shapes);

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
