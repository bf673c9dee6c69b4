// Run-time CPU feature checks for the x86 paths that Highway does not cover (AVX512_BF16 dot
// products, AMX tiles). Results are computed once; thread-safe.
#pragma once

namespace vidax {

bool cpu_has_avx2_fma();  // AVX2 and FMA3
bool cpu_has_avx512f();
bool cpu_has_avx512_bf16();
// AMX-TILE + AMX-BF16 present and, on Linux, the tile-data state granted to this process
// (arch_prctl ARCH_REQ_XCOMP_PERM, requested on the first call).
bool amx_bf16_usable();

}  // namespace vidax
