// The collectives of Megatron-style tensor parallelism across the `tp` group of a mesh
// (dist/mesh.h). A tp rank holds a column slice of every column-split linear's output (its
// heads, its FFN hidden units) and the matching input slice of every row-split linear
// (nn/linear.h), so:
//   - a row-split linear's output is a partial sum: tp_reduce_rows adds the ranks' partials
//     (deterministic, the same bits on every rank) and then the bias, once;
//   - an RMSNorm whose statistics span all heads (Wan's q/k norm) sums each row's squares over
//     the ranks before scaling its own slice: tp_rms_norm.
// With one tp rank both are the single-process computation (tp_rms_norm is rms_norm_rows).
//
// Thread-safety: called by the thread that issues collectives; kernels use OpenMP inside.
#pragma once

#include <cstdint>

#include "core/buffer.h"
#include "dist/group.h"

namespace vidax {

// y [rows, n] (row stride n): the sum over the tp ranks of their y, plus bias [n] (nullptr:
// none) added after the sum.
void tp_reduce_rows(dist::Group& tp, float* y, int64_t rows, int64_t n, const float* bias);

// x [rows, local_dim] with row `stride`: this rank's slice of rows of `full_dim` features;
// weight [local_dim] is the slice of the norm's weight. In place:
//   x *= weight / sqrt(sum over all ranks' columns of x^2 / full_dim + eps)
// `tp` null (one process) or of size 1: the single-process rms_norm_rows per row. `sums` is
// scratch ([rows] floats).
void tp_rms_norm(dist::Group* tp, float* x, int64_t rows, int64_t local_dim, int64_t stride,
                 int64_t full_dim, const float* weight, float eps, Buffer<float>& sums);

}  // namespace vidax
