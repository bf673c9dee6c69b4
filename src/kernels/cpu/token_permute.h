// Gather / scatter of attention rows between the DiT's native buffers and the contiguous,
// permuted per-group buffers the block-sparse executor reads. The DiT keeps q, k, v as strided
// [tokens, heads, head_dim] views (rows of the fused qkv projection); a head group of a sparse
// plan wants only its heads, with the tokens in its layout's order, packed as
// [tokens, group_heads, head_dim]. gather_token_heads does that copy (optionally rounding to
// bf16, with convert_floats' rounding, as the dense path); scatter_token_heads writes a group's
// output rows back to their native positions and heads, so the two are inverse to each other.
//
// perm[i] is the native (frame-major) token at permuted position i (sparse/token_layout.h);
// an empty perm is the identity. Thread-safety: re-entrant; each call parallelises over tokens
// with OpenMP.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"  // BFloat16

namespace vidax {

// A strided [tokens, heads, head_dim] f32 view: row t, head h starts at data + t*stride + h*hd.
struct StridedRows {
  const float* data = nullptr;
  int64_t tokens = 0, heads = 0, head_dim = 0;
  int64_t stride = 0;  // elements between rows, >= heads*head_dim
};

// The same view over bf16 rows (the DiT's bf16 copy of q/k/v).
struct StridedRowsBf16 {
  const BFloat16* data = nullptr;
  int64_t tokens = 0, heads = 0, head_dim = 0;
  int64_t stride = 0;  // elements between rows, >= heads*head_dim
};

// dst[i][g][:] = src[perm[i]][heads[g]][:] for i < src.tokens; dst is
// [src.tokens, heads.size(), head_dim]. Throws InputError on a perm of the wrong length, a
// token or head index out of range, or an inconsistent view.
void gather_token_heads(const StridedRows& src, std::span<const int32_t> perm,
                        std::span<const int64_t> heads, float* dst);
// Same, rounded to bf16 (round to nearest even).
void gather_token_heads(const StridedRows& src, std::span<const int32_t> perm,
                        std::span<const int64_t> heads, BFloat16* dst);
// Same from bf16 rows (a copy: half the bytes of the f32 source).
void gather_token_heads(const StridedRowsBf16& src, std::span<const int32_t> perm,
                        std::span<const int64_t> heads, BFloat16* dst);

// The inverse: dst[perm[i]][heads[g]][:] = src[i][g][:], src [tokens, heads.size(), head_dim]
// contiguous, dst a strided [tokens, ?, head_dim] view with row stride dst_stride. Elements of
// dst outside the listed heads are untouched.
void scatter_token_heads(const float* src, int64_t tokens, int64_t head_dim,
                         std::span<const int32_t> perm, std::span<const int64_t> heads, float* dst,
                         int64_t dst_stride, int64_t dst_heads);

}  // namespace vidax
