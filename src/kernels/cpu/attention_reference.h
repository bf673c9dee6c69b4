// Scalar reference attention used by the tests of the optimized kernels: plain loops, double
// accumulation, scores materialised one query row at a time. Slow on purpose; not for production.
// Thread-safe (no shared state; single-threaded).
#pragma once

#include "kernels/cpu/block_mask.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/flash_attention.h"

namespace vidax {

// Same contract as flash_attention (f32 inputs): out = softmax(scale * q k^T over keys <
// kv_valid) v, per head. Throws InputError on inconsistent dimensions.
void attention_reference(const float* q, const float* k, const float* v, float* out,
                         const AttentionDims& d);

// Same contract as block_sparse_attention (f32 inputs, contiguous): per head and query token,
// softmax over the keys < kv_valid whose tile is FULL, or BOUNDARY with the predicate's keep
// bit set (read tile by tile with BlockMask::get, not through the row lists); a query with no
// such key gives 0.
void masked_attention_reference(const float* q, const float* k, const float* v, float* out,
                                const BlockPartition& q_blocks, const BlockPartition& k_blocks,
                                const BlockMask& mask, const TilePredicate& predicate,
                                const BlockSparseDims& d);

}  // namespace vidax
