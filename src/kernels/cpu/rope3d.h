// Wan's 3-axis rotary position embedding (RoPE) for video tokens.
//
// A head of width d is split into complex pairs (x[2j], x[2j+1]) = (real, imag). The first
// d_f/2 pairs rotate with the token's frame index, the next d_h/2 with its row and the last
// d_w/2 with its column in the post-patch grid, where d_h = d_w = 2 * (d / 6) and
// d_f = d - d_h - d_w (d = 128: 44/42/42 channels). Pair i of an axis with a channels turns by
// angle p / 10000^(2i / a) at position p. As in the reference code, the table is built in double
// precision and the rotation is done in double, rounding to f32 once at the end.
//
// Rope3dTable is immutable once built and may be shared between threads; rope3d_apply splits
// tokens over the OpenMP pool when there is enough work (never its own threads) and is safe for
// disjoint x.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"  // BFloat16

namespace vidax {

struct Rope3dTable {
  static constexpr int64_t kDefaultMaxPositions = 1024;  // Wan's rope_params(1024, ...)

  int64_t head_dim = 0;
  int64_t max_positions = 0;
  std::array<int64_t, 3> axis_pairs{};  // complex pairs per axis: frame, height, width
  // [max_positions, head_dim / 2]: cos and sin of the angle of pair j at position p, where
  // pair j uses the frequency of the axis it belongs to.
  std::vector<double> cos;
  std::vector<double> sin;

  // head_dim must be even and positive.
  static Rope3dTable build(int64_t head_dim, int64_t max_positions = kDefaultMaxPositions);

  const double* cos_row(int64_t position) const { return cos.data() + position * head_dim / 2; }
  const double* sin_row(int64_t position) const { return sin.data() + position * head_dim / 2; }
};

// Rotates q or k in place. x is [tokens, heads, head_dim] with `row_stride` floats between
// consecutive tokens (>= heads * head_dim, e.g. 3 * dim inside a fused QKV buffer). Token
// t = (f * grid_h + h) * grid_w + w for t < grid_f * grid_h * grid_w; tokens beyond the grid
// (padding) are left untouched. Throws InputError if a grid extent exceeds the table's
// max_positions.
// copy16, when given, also receives every token's rotated row rounded to bf16 (round to
// nearest even, as convert_floats), copy16_stride elements apart: the bf16 attention kernels'
// inputs come out of this pass while the row is in cache, instead of a separate conversion
// pass over q and k. Rows past the grid are copied unrotated.
// first_token: the global index of row 0 (a sequence-parallel rank holds rows from there on).
void rope3d_apply(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                  int64_t grid_f, int64_t grid_h, int64_t grid_w, const Rope3dTable& table,
                  BFloat16* copy16 = nullptr, int64_t copy16_stride = 0, int64_t first_token = 0);

// Scalar reference: recomputes every angle from the formula (the table supplies only its
// head_dim, axis split and max_positions) and rotates pair by pair in double.
void rope3d_apply_reference(float* x, int64_t tokens, int64_t heads, int64_t head_dim,
                            int64_t row_stride, int64_t grid_f, int64_t grid_h, int64_t grid_w,
                            const Rope3dTable& table);

}  // namespace vidax
