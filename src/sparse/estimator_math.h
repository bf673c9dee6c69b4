// The heavy arithmetic of the policies' estimators, on the engine's kernels (oneDNN GEMM, vector
// exp) rather than scalar loops, so that mask construction stays a small share of the sparse
// attention it plans (issue 5 asks for at most 5%):
//   - sampled dense attention rows (Sparse VideoGen's routing, WEST calibration),
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

// c[m, n] = a[m, k] . b[n, k]^T, all f32 contiguous.
void gemm_abt(const float* a, int64_t m, const float* b, int64_t n, int64_t k, float* c);

}  // namespace vidax::sparse
