// Measures the machine's arithmetic peak with independent-accumulator FMA loops on all OpenMP
// threads: f32 FMA (AVX-512 when present, else AVX2), bf16 dot products (AVX512_BF16 vdpbf16ps) and
// AMX bf16 tile products (TDPBF16PS) where the CPU has them. Used to report what fraction of the
// hardware a benchmark reaches. Thread-safe (runs its own parallel region); takes about `seconds`
// per measurement.
#pragma once

namespace vidax {

struct PeakFlops {
  double f32_gflops = 0;       // 2 FLOPs per lane per FMA
  double bf16_gflops = 0;      // 2 FLOPs per bf16 pair-product; 0 when AVX512_BF16 is missing
  double amx_bf16_gflops = 0;  // AMX tile dot products (what oneDNN's bf16 GEMMs use); 0 if absent
  int threads = 0;
  const char* f32_isa = "";
  const char* bf16_isa = "";
  const char* amx_isa = "";
};

PeakFlops measure_peak_flops(double seconds = 0.3);

}  // namespace vidax
