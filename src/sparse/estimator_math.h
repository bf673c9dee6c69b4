// The heavy arithmetic of the policies' estimators, on the engine's kernels (oneDNN GEMM, vector
// exp) rather than scalar loops, so that mask construction stays a small share of the sparse
// attention it plans (issue 5 asks for at most 5%):
//   - sampled dense attention rows (WEST calibration, f32) and the attention mass sampled rows
//     give to sets of keys (Sparse VideoGen's routing, bf16-rounded q/k on AMX tiles),
//   - a plain f32 C = A . B^T (SPADE's block estimator).
// Thread-safety: reentrant; each call parallelises with the shared OpenMP pool.
#pragma once

#include <cstdint>
#include <vector>

#include "sparse/attention_policy.h"

namespace vidax::sparse {

// probs[j * rows.size() + r] = softmax_j(q_rows[r] . k_j / sqrt(d)) for head `head`
// (frame-major rows and keys), key-major so that every pass over it is contiguous. Equal to
// dense_attention_row (policy_options.h) up to f32 rounding.
void sampled_attention_rows(const AttentionCall& call, int64_t head,
                            const std::vector<int64_t>& rows, std::vector<float>& probs);

// For every head h, sampled frame-major query row i and key set s: the attention mass that row i
// gives the keys of its set s, softmax over all keys of bf16-rounded q_i . k_j / sqrt(d) (the
// precision the DiT's bf16 attention runs at; products of bf16 values are exact in f32):
// mass[(h * sets + s) * rows.size() + i]. keep[s] is a bitmap [tokens][words], words =
// ceil(rows / 64): bit i of key j's words says key j is in row i's set s. 1..8 sets.
// Never materialises the [tokens, rows] probabilities: per 512-key chunk (all heads of a chunk in
// turn, so the strided call is read row by row once) the keys are rounded while packed into AMX
// tiles, the chunk's scores are exponentiated against the chunk maximum in cache (AVX-512) and
// summed (f32 within the chunk), and the chunks are combined in double. Without AMX where bf16
// dot products are fast (bf16_dot_product_fast, AMD Zen 4+) the same per-chunk pass with the
// chunk's scores from vdpbf16ps on the keys rounded into a packed buffer. Otherwise one f32
// GEMM per head on the rounded values, then the same chunk pass (AVX-512 where present, else
// plain loops). allow_fast = false forces the GEMM and plain loops, so tests cover that path on
// any machine.
void sampled_attention_mass_bf16(const AttentionCall& call, const std::vector<int64_t>& rows,
                                 const std::vector<const uint64_t*>& keep,
                                 std::vector<double>& mass, bool allow_fast = true);

// c[m, n] = a[m, k] . b[n, k]^T, all f32 contiguous.
void gemm_abt(const float* a, int64_t m, const float* b, int64_t n, int64_t k, float* c);

}  // namespace vidax::sparse
