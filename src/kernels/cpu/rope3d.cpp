// 3D RoPE: table builder, Highway rotation in f64 lanes, and the scalar reference.

#include "kernels/cpu/rope3d.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/convert.h"
#include "core/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/rope3d.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace vidax {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Rotates `heads` consecutive rows of head_dim floats. c and s are per-channel (interleaved)
// tables for this token: c[2j] = c[2j+1] = cos_j, s[2j] = -sin_j, s[2j+1] = sin_j, so that
// out = x * c + swap_pairs(x) * s = (re cos - im sin, im cos + re sin), in double.
void RotateHeads(float* x, int64_t heads, int64_t head_dim, const double* c, const double* s) {
  const size_t d = static_cast<size_t>(head_dim);
  size_t vec_end = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t lanes = hn::Lanes(dd);
  vec_end = d / lanes * lanes;
#endif
  for (int64_t h = 0; h < heads; ++h) {
    float* row = x + h * head_dim;
#if HWY_TARGET != HWY_SCALAR
    for (size_t i = 0; i < vec_end; i += lanes) {
      const auto v = hn::PromoteTo(dd, hn::LoadU(df, row + i));
      const auto rotated = hn::Add(hn::Mul(v, hn::LoadU(dd, c + i)),
                                   hn::Mul(hn::Reverse2(dd, v), hn::LoadU(dd, s + i)));
      hn::StoreU(hn::DemoteTo(df, rotated), df, row + i);
    }
#endif
    for (size_t i = vec_end; i < d; i += 2) {  // vec_end is even: pairs never straddle
      const double re = row[i], im = row[i + 1];
      row[i] = static_cast<float>(re * c[i] + im * s[i]);
      row[i + 1] = static_cast<float>(im * c[i + 1] + re * s[i + 1]);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace vidax
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace vidax {
namespace {

// Channels per axis for head width d: frame d - 4 (d / 6), height and width 2 (d / 6) each.
std::array<int64_t, 3> axis_channels(int64_t head_dim) {
  const int64_t hw = 2 * (head_dim / 6);
  return {head_dim - 2 * hw, hw, hw};
}

// Inverse frequency of pair i of an axis with `channels` real channels, as Wan's rope_params:
// 1 / 10000^(arange(0, channels, 2) / channels) in float64.
double inverse_frequency(int64_t i, int64_t channels) {
  return 1.0 / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(channels));
}

void check_apply_args(const float* x, int64_t tokens, int64_t heads, int64_t head_dim,
                      int64_t row_stride, int64_t grid_f, int64_t grid_h, int64_t grid_w,
                      const Rope3dTable& table) {
  VIDAX_CHECK(table.head_dim == head_dim, "RoPE table built for head_dim ", table.head_dim,
              ", applied to head_dim ", head_dim);
  VIDAX_CHECK(tokens >= 0 && heads >= 0 && row_stride >= heads * head_dim, "rope3d_apply: tokens ",
              tokens, ", heads ", heads, ", row_stride ", row_stride);
  VIDAX_CHECK(grid_f >= 0 && grid_h >= 0 && grid_w >= 0, "negative grid extent");
  VIDAX_CHECK(x != nullptr || tokens * heads == 0, "null x");
  const int64_t largest = std::max({grid_f, grid_h, grid_w});
  if (largest > table.max_positions) {
    throw_input_error("video grid ", grid_f, "x", grid_h, "x", grid_w,
                      " (frames x height x width after patching) exceeds the RoPE table's ",
                      table.max_positions, " positions per axis");
  }
}

// Grid coordinates of token t in row-major (f, h, w) order.
struct GridPos {
  int64_t f, h, w;
};
GridPos grid_pos(int64_t t, int64_t grid_h, int64_t grid_w) {
  return {t / (grid_h * grid_w), (t / grid_w) % grid_h, t % grid_w};
}

}  // namespace

HWY_EXPORT(RotateHeads);

Rope3dTable Rope3dTable::build(int64_t head_dim, int64_t max_positions) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw_input_error("RoPE needs a positive, even head dimension; got ", head_dim);
  }
  VIDAX_CHECK(max_positions > 0, "max_positions ", max_positions);
  Rope3dTable t;
  t.head_dim = head_dim;
  t.max_positions = max_positions;
  const std::array<int64_t, 3> channels = axis_channels(head_dim);
  for (int a = 0; a < 3; ++a)
    t.axis_pairs[static_cast<size_t>(a)] = channels[static_cast<size_t>(a)] / 2;
  const int64_t pairs = head_dim / 2;
  // Inverse frequency of every pair j (the axis's own index i restarts at 0 on each axis).
  std::vector<double> inv(static_cast<size_t>(pairs));
  int64_t j = 0;
  for (int a = 0; a < 3; ++a) {
    for (int64_t i = 0; i < t.axis_pairs[static_cast<size_t>(a)]; ++i) {
      inv[static_cast<size_t>(j++)] = inverse_frequency(i, channels[static_cast<size_t>(a)]);
    }
  }
  t.cos.resize(static_cast<size_t>(max_positions * pairs));
  t.sin.resize(t.cos.size());
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t k = 0; k < pairs; ++k) {
      const double angle = static_cast<double>(p) * inv[static_cast<size_t>(k)];
      t.cos[static_cast<size_t>(p * pairs + k)] = std::cos(angle);
      t.sin[static_cast<size_t>(p * pairs + k)] = std::sin(angle);
    }
  }
  return t;
}

void rope3d_apply(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                  int64_t grid_f, int64_t grid_h, int64_t grid_w, const Rope3dTable& table,
                  BFloat16* copy16, int64_t copy16_stride, int64_t first_token) {
  check_apply_args(x, tokens, heads, head_dim, row_stride, grid_f, grid_h, grid_w, table);
  VIDAX_CHECK(first_token >= 0, "rope3d_apply: first_token ", first_token);
  VIDAX_CHECK(copy16 == nullptr || copy16_stride >= heads * head_dim, "rope3d_apply: copy stride ",
              copy16_stride);
  const int64_t n =
      std::clamp<int64_t>(grid_f * grid_h * grid_w - first_token, 0, tokens);  // rows on the grid
  auto copy_row = [&](int64_t t) {
    convert_floats_serial(x + t * row_stride, DType::kF32, copy16 + t * copy16_stride, DType::kBF16,
                          static_cast<size_t>(heads * head_dim));
  };
  if (copy16 != nullptr)
    for (int64_t t = std::max<int64_t>(n, 0); t < tokens; ++t) copy_row(t);  // past the grid
  if (n <= 0 || heads == 0) return;
  const int64_t pairs = head_dim / 2;
  const int64_t end_f = table.axis_pairs[0], end_h = end_f + table.axis_pairs[1];

  // Rotates tokens [t0, t1) with per-token interleaved cos/sin rows built from three table rows.
  auto run = [&](int64_t t0, int64_t t1) {
    std::vector<double> c(static_cast<size_t>(head_dim)), s(c.size());
    for (int64_t t = t0; t < t1; ++t) {
      const GridPos g = grid_pos(first_token + t, grid_h, grid_w);
      const double* cf = table.cos_row(g.f);
      const double* sf = table.sin_row(g.f);
      const double* ch = table.cos_row(g.h);
      const double* sh = table.sin_row(g.h);
      const double* cw = table.cos_row(g.w);
      const double* sw = table.sin_row(g.w);
      for (int64_t j = 0; j < pairs; ++j) {
        const double cj = j < end_f ? cf[j] : j < end_h ? ch[j] : cw[j];
        const double sj = j < end_f ? sf[j] : j < end_h ? sh[j] : sw[j];
        c[static_cast<size_t>(2 * j)] = cj;
        c[static_cast<size_t>(2 * j + 1)] = cj;
        s[static_cast<size_t>(2 * j)] = -sj;
        s[static_cast<size_t>(2 * j + 1)] = sj;
      }
      HWY_DYNAMIC_DISPATCH(RotateHeads)(x + t * row_stride, heads, head_dim, c.data(), s.data());
      if (copy16 != nullptr) copy_row(t);
    }
  };

  constexpr int64_t kMinParallelElements = int64_t{1} << 14;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t pieces =
      std::min<int64_t>({threads, n, n * heads * head_dim / kMinParallelElements});
  if (pieces <= 1) {
    run(0, n);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(pieces))
  for (int64_t p = 0; p < pieces; ++p) run(n * p / pieces, n * (p + 1) / pieces);
}

void rope3d_apply_reference(float* x, int64_t tokens, int64_t heads, int64_t head_dim,
                            int64_t row_stride, int64_t grid_f, int64_t grid_h, int64_t grid_w,
                            const Rope3dTable& table) {
  check_apply_args(x, tokens, heads, head_dim, row_stride, grid_f, grid_h, grid_w, table);
  const int64_t n = std::min(tokens, grid_f * grid_h * grid_w);
  const std::array<int64_t, 3> channels = axis_channels(head_dim);
  for (int64_t t = 0; t < n; ++t) {
    const GridPos g = grid_pos(t, grid_h, grid_w);
    const int64_t pos[3] = {g.f, g.h, g.w};
    for (int64_t hd = 0; hd < heads; ++hd) {
      float* row = x + t * row_stride + hd * head_dim;
      int64_t j = 0;  // pair index within the head
      for (int a = 0; a < 3; ++a) {
        const int64_t axis_dim = channels[static_cast<size_t>(a)];
        for (int64_t i = 0; i < axis_dim / 2; ++i, ++j) {
          const double angle = static_cast<double>(pos[a]) * inverse_frequency(i, axis_dim);
          const double cs = std::cos(angle), sn = std::sin(angle);
          const double re = row[2 * j], im = row[2 * j + 1];
          // (re + i im)(cos + i sin) in complex128, rounded to f32 once.
          row[2 * j] = static_cast<float>(re * cs - im * sn);
          row[2 * j + 1] = static_cast<float>(re * sn + im * cs);
        }
      }
    }
  }
}

}  // namespace vidax
#endif  // HWY_ONCE
