// vidax bench peak's FMA loops run on this machine's vector unit (AVX-512, else AVX2 + FMA) and
// report a rate; no timing threshold, only that the loop for this CPU ran and counted work.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/peak.h"

namespace vidax {
namespace {

TEST(Peak, MeasuresTheF32FmaUnitThisCpuHas) {
  const PeakFlops p = measure_peak_flops(0.02);
  EXPECT_GE(p.threads, 1);
  if (cpu_has_avx512f()) {
    EXPECT_EQ(std::string(p.f32_isa), "avx512f vfmadd");
  } else if (cpu_has_avx2_fma()) {
    EXPECT_EQ(std::string(p.f32_isa), "avx2 vfmadd");
  } else {
    GTEST_SKIP() << "no AVX-512 or AVX2 + FMA: no f32 peak loop";
  }
  EXPECT_GT(p.f32_gflops, 0.0);
  // A unit the CPU lacks reports 0, never a made-up rate.
  if (!cpu_has_avx512_bf16()) {
    EXPECT_EQ(p.bf16_gflops, 0.0);
  }
  if (!amx_bf16_usable()) {
    EXPECT_EQ(p.amx_bf16_gflops, 0.0);
  }
}

}  // namespace
}  // namespace vidax
