// Ring attention's arithmetic: merging attention results over disjoint key chunks by their
// log-sum-exp (the flash kernels return it: AttentionDims::lse).
//
// Thread-safety: re-entrant; parallelises over rows with OpenMP.
#pragma once

#include <cstdint>

namespace vidax {

// Merges a chunk result into a running one: (out, lse) <- softmax-weighted combination of
// (out, lse) and (part_out, part_lse), per row and head. Rows with lse = -inf take the other.
void merge_attention_partial(float* out, float* lse, const float* part_out, const float* part_lse,
                             int64_t rows, int64_t heads, int64_t head_dim, int64_t out_stride,
                             int64_t part_stride);

}  // namespace vidax
