// Whether oneDNN can run bf16 here. Its bf16 matmul and convolution primitives need AVX-512
// (avx512_core and up) or AVX2-VNNI-2; on a plain AVX2 machine (e.g. AMD Zen 3) creating one
// throws. Callers then widen the bf16 values to f32 and run oneDNN's f32 primitives, which give
// the same products (a product of two bf16 values is exact in f32) with f32 sums.
#pragma once

namespace vidax {

// Probed once, with tiny primitives; thread-safe.
bool onednn_bf16_supported();

}  // namespace vidax
