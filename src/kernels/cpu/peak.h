// Measures the machine's arithmetic peak with independent-accumulator FMA loops on all OpenMP
// threads: f32 FMA (AVX-512 when present) and bf16 dot products (AVX512_BF16 vdpbf16ps). Used to
// report what fraction of the hardware a benchmark reaches. Thread-safe (runs its own parallel
// region); takes about `seconds` per measurement.
#pragma once

namespace vidax {

struct PeakFlops {
  double f32_gflops = 0;   // 2 FLOPs per lane per FMA
  double bf16_gflops = 0;  // 2 FLOPs per bf16 pair-product; 0 when AVX512_BF16 is missing
  int threads = 0;
  const char* f32_isa = "";
  const char* bf16_isa = "";
};

PeakFlops measure_peak_flops(double seconds = 0.3);

}  // namespace vidax
