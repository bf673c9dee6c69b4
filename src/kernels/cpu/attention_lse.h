// Ring attention's arithmetic: merging attention results over disjoint key chunks by their
// log-sum-exp (the flash kernels return it: AttentionDims::lse), and a scalar reference of
// attention with its log-sum-exp that the kernel tests compare the flash kernels' lse against.
// f32 accumulation; bf16 inputs are widened. Per (head, query row): an online softmax over the
// valid keys in blocks of 64.
//
// Thread-safety: re-entrant; parallelises over heads x query rows with OpenMP.
#pragma once

#include <cstdint>

#include "core/tensor.h"  // BFloat16

namespace vidax {

struct ChunkAttentionDims {
  int64_t q_len = 0, kv_valid = 0;  // query rows; keys/values used (the first kv_valid rows)
  int64_t heads = 0, head_dim = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0, out_stride = 0;  // elements between rows
  float scale = 1.0f;
};

// out [q_len, heads, head_dim] (f32, out_stride) = softmax(scale q k^T) v over the first
// kv_valid keys; lse [q_len, heads] = log(sum_j exp(scale q.k_j)) per row and head. kv_valid = 0
// gives out = 0 and lse = -inf.
void attention_with_lse(const float* q, const float* k, const float* v, float* out, float* lse,
                        const ChunkAttentionDims& d);
void attention_with_lse(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
                        float* lse, const ChunkAttentionDims& d);

// Merges a chunk result into a running one: (out, lse) <- softmax-weighted combination of
// (out, lse) and (part_out, part_lse), per row and head. Rows with lse = -inf take the other.
void merge_attention_partial(float* out, float* lse, const float* part_out, const float* part_lse,
                             int64_t rows, int64_t heads, int64_t head_dim, int64_t out_stride,
                             int64_t part_stride);

}  // namespace vidax
