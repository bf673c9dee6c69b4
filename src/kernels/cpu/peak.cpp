#include "kernels/cpu/peak.h"

#include <immintrin.h>
#include <omp.h>

#include <chrono>

// GCC 12 warns inside its own AVX-512 intrinsic headers (their _mm512_undefined_* helpers).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vidax {
namespace {

using Clock = std::chrono::steady_clock;

// Stored and summed in scalar code: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.
__attribute__((target("avx512f"))) double horizontal_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  double s = 0;
  for (float x : lanes) s += x;
  return s;
}

// 12 independent accumulators hide the FMA latency (4 cycles x 2 ports + margin).
__attribute__((target("avx512f"))) double f32_fma_loop(long iters) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(0.0f);
  const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm512_fmadd_ps(a, b, c);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return horizontal_sum(s);
}

__attribute__((target("avx512f,avx512bf16"))) double bf16_dot_loop(long iters) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(0.0f);
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0
  const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3380);  // ~6e-8
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return horizontal_sum(s);
}

// Runs loop on every thread for about `seconds`; returns GFLOP/s given FLOPs per iteration.
template <typename Loop>
double measure(Loop loop, double flops_per_iter, double seconds) {
  long iters = 1 << 16;
  for (;;) {  // calibrate on one thread
    const auto t0 = Clock::now();
    volatile double sink = loop(iters);
    (void)sink;
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > 0.02) {
      iters = static_cast<long>(static_cast<double>(iters) * seconds / dt) + 1;
      break;
    }
    iters *= 4;
  }
  const int threads = omp_get_max_threads();
  const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
  {
    volatile double sink = loop(iters);
    (void)sink;
  }
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  return flops_per_iter * static_cast<double>(iters) * threads / dt * 1e-9;
}

}  // namespace

PeakFlops measure_peak_flops(double seconds) {
  PeakFlops p;
  p.threads = omp_get_max_threads();
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    p.f32_isa = "avx512f vfmadd";
    p.f32_gflops = measure(f32_fma_loop, 12.0 * 16 * 2, seconds);
  }
  if (__builtin_cpu_supports("avx512bf16")) {
    p.bf16_isa = "avx512_bf16 vdpbf16ps";
    p.bf16_gflops = measure(bf16_dot_loop, 12.0 * 32 * 2, seconds);
  }
  return p;
}

}  // namespace vidax
