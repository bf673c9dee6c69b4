// Bulk conversion between float storage dtypes (F32, BF16, F16, F8_E4M3, F8_E5M2), vectorized
// with Highway and dispatched at run time. f32 -> bf16/f16 rounds to nearest even.
// Thread-safe; callers parallelise over disjoint ranges.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace vidax {

// Converts n contiguous elements. Both dtypes must be float types; F8 is accepted as source only.
void convert_floats(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n);

// The same conversion on the calling thread only (convert_floats opens an OpenMP region, which
// costs more than a short row): for many short rows converted inside a parallel loop.
void convert_floats_serial(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n);

// `rows` rows of `cols` elements, `src_stride` / `dst_stride` elements apart (e.g. one slice of
// a fused q|k|v buffer), rows split over the OpenMP pool.
void convert_float_rows(const void* src, DType src_dtype, size_t src_stride, void* dst,
                        DType dst_dtype, size_t dst_stride, size_t rows, size_t cols);

// Scalar reference used by tests.
void convert_floats_reference(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                              size_t n);

}  // namespace vidax
