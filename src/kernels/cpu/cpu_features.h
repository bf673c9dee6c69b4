// Run-time CPU feature checks for the x86 paths that Highway does not cover (AVX512_BF16 dot
// products, AMX tiles). Results are computed once; thread-safe.
#pragma once

namespace vidax {

bool cpu_has_avx2_fma();  // AVX2 and FMA3
bool cpu_has_avx512f();
bool cpu_has_avx512_bf16();
// AMX-TILE + AMX-BF16 (with AVX512-BF16 and AVX512-VBMI, which every AMX CPU has) present and,
// on Linux, the tile-data state granted to this process (arch_prctl ARCH_REQ_XCOMP_PERM,
// requested on the first call).
bool amx_bf16_usable();

// Whether BF16 compute should run on AVX512_BF16 dot products (vdpbf16ps) rather than widened to
// f32 FMA, on a machine without AMX: true on AMD cores with AVX512_BF16 (Zen 4 and later), where
// one vdpbf16ps does the work of two vfmadd231ps at the same issue rate, false on Intel, where it
// issues at a quarter of the FMA rate (Sapphire Rapids with AMX off, `vidax bench peak`:
// 86 against 168 GFLOP/s). Decided by the vendor, not timed, so that every run of a process picks
// the same kernels (their results differ in rounding). VIDAX_BF16_DOT=1 or 0 overrides it where
// the CPU has AVX512_BF16 and no usable AMX (elsewhere it is always false).
// docs/kernels.md, "Without AMX".
bool bf16_dot_product_fast();

}  // namespace vidax
