// Block-sparse flash attention on the CPU: out = softmax(scale * q k^T + mask) v for every head
// of a BlockMask, visiting for each (head, query block) only the key blocks its mask row lists.
// FULL tiles run exactly like the dense kernel (no mask is evaluated); BOUNDARY tiles ask the
// TilePredicate for a keep tile and mask the scores before the softmax. Online softmax in f32,
// f32 or bf16 inputs, f32 output. With every tile FULL it computes the same thing as
// flash_attention (same packing, register tiles and exp), up to the order of the key blocks.
//
// By default the inputs are already permuted (kernels/cpu/token_permute.h): q [q_tokens, heads,
// head_dim], k and v [k_tokens, heads, head_dim], all contiguous, blocks given by BlockPartitions
// over the permuted positions (query and key partitions may differ; blocks may be ragged).
// BlockSparseInput lets the executor read them in place instead (see there). Keys at positions
// >= kv_valid are padding and never attend.
//
// Rows whose every key is masked (no active tile, or every element of their active tiles
// masked) have no softmax; their output is 0 (the scalar reference does the same).
//
// The per-target code lives in block_sparse_attention-inl.h and is compiled inside
// flash_attention.cpp, whose packing, register tiles, exp and AMX tile pipeline it reuses.
//
// Thread-safety: re-entrant; each call parallelises with OpenMP over heads x query blocks. The
// predicate is called from several threads at once.
#pragma once

#include <cstdint>

#include "core/tensor.h"  // BFloat16
#include "kernels/cpu/block_mask.h"
#include "kernels/cpu/flash_attention.h"  // AttentionBf16Kernel

namespace vidax {

struct BlockSparseDims {
  int64_t heads = 0;     // == mask.heads()
  int64_t head_dim = 0;  // any value >= 1
  // Keys at permuted positions >= kv_valid are excluded; 0 means all keys are valid.
  int64_t kv_valid = 0;
  float scale = 0;  // softmax scale, finite and non-zero (usually 1/sqrt(head_dim))
};

// Where the output goes. By default out is [q_tokens, heads, head_dim] contiguous. A plan
// executor can instead write each row straight to its place in the model's buffer (saving the
// scatter): row i of mask head h goes to out + rows[i] * stride + heads[h] * head_dim.
struct BlockSparseOutput {
  int64_t stride = 0;              // elements between destination rows; 0: heads * head_dim
  const int32_t* rows = nullptr;   // [q_tokens] destination rows (a permutation); null: identity
  const int64_t* heads = nullptr;  // [heads] destination heads; null: identity
  int64_t dest_heads = 0;          // heads of a destination row when `heads` is given
};

// Where q, k and v rows come from. By default they are [tokens, heads, head_dim] contiguous, in
// permuted order. A plan executor can instead read them in place from the model's buffers, with
// no gather pass: permuted position i of mask head h is then source row rows[i] (a permutation)
// at q + rows[i] * stride + heads[h] * head_dim, and the same for k and v. Self-attention only
// when `rows` is given: the query and key partitions must cover the same tokens.
struct BlockSparseInput {
  int64_t stride = 0;              // elements between source rows; 0: heads * head_dim
  const int32_t* rows = nullptr;   // [tokens] source rows (a permutation); null: identity
  const int64_t* heads = nullptr;  // [heads] source heads; null: identity
  int64_t src_heads = 0;           // heads of a source row when `heads` is given
};

// The partitions give q_tokens = q_blocks.tokens() and k_tokens = k_blocks.tokens(); the mask
// is [heads] x q_blocks x k_blocks with rows built; `predicate` is required when the mask has
// BOUNDARY tiles. Throws InputError on inconsistent arguments.
void block_sparse_attention(const float* q, const float* k, const float* v, float* out,
                            const BlockPartition& q_blocks, const BlockPartition& k_blocks,
                            const BlockMask& mask, const TilePredicate& predicate,
                            const BlockSparseDims& d, const BlockSparseOutput& o = {},
                            const BlockSparseInput& in = {});

// bf16 inputs with the fastest bf16 kernel of the machine (AttentionBf16Kernel::kAuto).
void block_sparse_attention(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
                            const BlockPartition& q_blocks, const BlockPartition& k_blocks,
                            const BlockMask& mask, const TilePredicate& predicate,
                            const BlockSparseDims& d, const BlockSparseOutput& o = {},
                            const BlockSparseInput& in = {});

// One specific bf16 kernel (see flash_attention_bf16_available); InputError if unavailable.
void block_sparse_attention_bf16(AttentionBf16Kernel kernel, const BFloat16* q, const BFloat16* k,
                                 const BFloat16* v, float* out, const BlockPartition& q_blocks,
                                 const BlockPartition& k_blocks, const BlockMask& mask,
                                 const TilePredicate& predicate, const BlockSparseDims& d,
                                 const BlockSparseOutput& o = {}, const BlockSparseInput& in = {});

namespace detail {
// Dispatch into the per-target code (defined in flash_attention.cpp). kernel: -1 for f32
// inputs, else a resolved AttentionBf16Kernel (not kAuto). Arguments already validated.
void block_sparse_dispatch(int kernel, const void* q, const void* k, const void* v, float* out,
                           const BlockPartition& q_blocks, const BlockPartition& k_blocks,
                           const BlockMask& mask, const TilePredicate& predicate,
                           const BlockSparseDims& d, const BlockSparseOutput& o,
                           const BlockSparseInput& in);
}  // namespace detail

}  // namespace vidax
