#include "kernels/cpu/peak.h"

#include "kernels/cpu/cpu_features.h"

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

// The same on 256-bit registers, for machines without AVX-512 (e.g. AMD Zen 3).
__attribute__((target("avx2,fma"))) double f32_fma_loop_avx2(long iters) {
  __m256 acc[12];
  for (auto& a : acc) a = _mm256_set1_ps(0.0f);
  const __m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm256_fmadd_ps(a, b, c);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  double sum = 0;
  for (float x : lanes) sum += x;
  return sum;
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

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// Four independent 16x16 f32 accumulator tiles, each updated by TDPBF16PS with a 16x32 bf16 A
// tile and a 32x16 bf16 B tile: 16*16*32*2 = 16384 FLOPs per instruction.
__attribute__((target("amx-tile,amx-bf16"))) double amx_bf16_loop(long iters) {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < 6; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  alignas(64) static thread_local uint16_t a[16 * 32], b[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) a[i] = b[i] = 0x3f80;
  alignas(64) float c[16 * 16] = {};
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, b, 64);
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0];
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
  if (cpu_has_avx512f()) {
    p.f32_isa = "avx512f vfmadd";
    p.f32_gflops = measure(f32_fma_loop, 12.0 * 16 * 2, seconds);
  } else if (cpu_has_avx2_fma()) {
    p.f32_isa = "avx2 vfmadd";
    p.f32_gflops = measure(f32_fma_loop_avx2, 12.0 * 8 * 2, seconds);
  }
  if (cpu_has_avx512_bf16()) {
    p.bf16_isa = "avx512_bf16 vdpbf16ps";
    p.bf16_gflops = measure(bf16_dot_loop, 12.0 * 32 * 2, seconds);
  }
  if (amx_bf16_usable()) {
    p.amx_isa = "amx_bf16 tdpbf16ps";
    p.amx_bf16_gflops = measure(amx_bf16_loop, 4.0 * 16384, seconds);
  }
  return p;
}

}  // namespace vidax
