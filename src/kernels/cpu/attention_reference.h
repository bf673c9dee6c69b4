// Scalar reference attention used by the tests of the optimized kernels: plain loops, double
// accumulation, scores materialised one query row at a time. Slow on purpose; not for production.
// Thread-safe (no shared state; single-threaded).
#pragma once

#include "kernels/cpu/flash_attention.h"

namespace vidax {

// Same contract as flash_attention (f32 inputs): out = softmax(scale * q k^T over keys <
// kv_valid) v, per head. Throws InputError on inconsistent dimensions.
void attention_reference(const float* q, const float* k, const float* v, float* out,
                         const AttentionDims& d);

}  // namespace vidax
