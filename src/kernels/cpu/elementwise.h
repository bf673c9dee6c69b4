// Element-wise and normalisation kernels on contiguous row-major f32 rows: LayerNorm (plain,
// affine, and fused with adaLN modulation), RMSNorm, gated residual adds, GELU (tanh and erf),
// SiLU, and the exp/tanh/erf they are built on.
//
// Each kernel is vectorised with Highway and picks the best SIMD target at run time; a scalar
// `_reference` twin (double-precision statistics and libm transcendentals) lives in
// elementwise_reference.cpp for tests. Row kernels split rows over the OpenMP pool when there is
// enough work (inside an enclosing parallel region they run serially); they never start threads
// of their own. All functions are thread-safe for disjoint outputs.
//
// Accuracy: norms keep their statistics in f32 with a corrected two-pass mean/variance.
// Measured against the correctly rounded result: exp and tanh 1 ulp, erf, silu and gelu_tanh
// 3 ulp, gelu_erf 5 ulp (results that are themselves subnormal excepted; see docs/kernels.md).
#pragma once

#include <cstdint>

#include "core/tensor.h"  // BFloat16

namespace vidax {

// y may alias x (y == x) for every kernel below; partial overlaps are not allowed.

// torch.nn.LayerNorm over the last `dim` elements of each row: biased variance, eps inside the
// square root; weight and bias may be null (non-affine).
void layer_norm_rows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight,
                     const float* bias, float eps);

// Fused non-affine LayerNorm + adaLN modulation: y = LN(x) * (1 + scale) + shift.
// shift/scale point at `dim` floats and advance by mod_row_stride floats per row (0: the same
// vector for every row, as in Wan 2.1; dim * k: per-token modulation, as in Wan 2.2).
void layer_norm_modulate_rows(const float* x, float* y, int64_t rows, int64_t dim,
                              const float* shift, const float* scale, int64_t mod_row_stride,
                              float eps);
// The same, writing bf16 (round to nearest even) for bf16 GEMM inputs.
void layer_norm_modulate_rows_bf16(const float* x, BFloat16* y, int64_t rows, int64_t dim,
                                   const float* shift, const float* scale, int64_t mod_row_stride,
                                   float eps);

// Wan's RMSNorm: y = x * rsqrt(mean(x^2) + eps) * weight over the full row; weight may be null.
void rms_norm_rows(const float* x, float* y, int64_t rows, int64_t dim, const float* weight,
                   float eps);

// x[r, :] += y[r, :] * gate[r * gate_row_stride + :] (gate_row_stride 0: one gate vector).
void gated_residual_add_rows(float* x, const float* y, const float* gate, int64_t rows, int64_t dim,
                             int64_t gate_row_stride);

// x += y over n elements.
void add_rows(float* x, const float* y, int64_t n);

// torch.nn.functional.gelu(approximate='tanh'), with PyTorch's f32 constants
// (sqrt(2/pi) and 0.044715 rounded to float); evaluated as x * sigmoid(2u), which has no
// cancellation for negative x.
void gelu_tanh(const float* x, float* y, int64_t n);
// Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2))), evaluated through erfc for negative x.
void gelu_erf(const float* x, float* y, int64_t n);
// x * sigmoid(x).
void silu(const float* x, float* y, int64_t n);

// The vector transcendentals, exposed for tests and other kernels.
void exp_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void erf_f32(const float* x, float* y, int64_t n);

// Scalar references (double precision inside, rounded to f32 once).
void layer_norm_rows_reference(const float* x, float* y, int64_t rows, int64_t dim,
                               const float* weight, const float* bias, float eps);
void layer_norm_modulate_rows_reference(const float* x, float* y, int64_t rows, int64_t dim,
                                        const float* shift, const float* scale,
                                        int64_t mod_row_stride, float eps);
void layer_norm_modulate_rows_bf16_reference(const float* x, BFloat16* y, int64_t rows, int64_t dim,
                                             const float* shift, const float* scale,
                                             int64_t mod_row_stride, float eps);
void rms_norm_rows_reference(const float* x, float* y, int64_t rows, int64_t dim,
                             const float* weight, float eps);
void gated_residual_add_rows_reference(float* x, const float* y, const float* gate, int64_t rows,
                                       int64_t dim, int64_t gate_row_stride);
void add_rows_reference(float* x, const float* y, int64_t n);
void gelu_tanh_reference(const float* x, float* y, int64_t n);
void gelu_erf_reference(const float* x, float* y, int64_t n);
void silu_reference(const float* x, float* y, int64_t n);
void exp_f32_reference(const float* x, float* y, int64_t n);
void tanh_f32_reference(const float* x, float* y, int64_t n);
void erf_f32_reference(const float* x, float* y, int64_t n);

}  // namespace vidax
