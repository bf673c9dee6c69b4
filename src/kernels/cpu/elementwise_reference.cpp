// Scalar references for the element-wise kernels: statistics and transcendentals in double,
// rounded to f32 once. The gated/plain adds use torch's f32 operation order.

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/elementwise.h"

namespace vidax {
namespace {

struct RowStats {
  double mean;
  double rstd;
};

RowStats layer_norm_stats(const float* x, int64_t dim, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < dim; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(dim);
  double sq = 0;
  for (int64_t i = 0; i < dim; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const double var = sq / static_cast<double>(dim);
  return {mean, 1.0 / std::sqrt(var + static_cast<double>(eps))};
}

// PyTorch's f32 constants for the tanh GELU.
constexpr float kGeluBeta = 0.797884561f;
constexpr float kGeluKappa = 0.044715f;

}  // namespace

void layer_norm_rows_reference(const float* x, float* y, int64_t rows, int64_t dim,
                               const float* weight, const float* bias, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const RowStats s = layer_norm_stats(xr, dim, eps);
    for (int64_t i = 0; i < dim; ++i) {
      double v = (xr[i] - s.mean) * s.rstd;
      if (weight != nullptr) v *= weight[i];
      if (bias != nullptr) v += bias[i];
      yr[i] = static_cast<float>(v);
    }
  }
}

void layer_norm_modulate_rows_reference(const float* x, float* y, int64_t rows, int64_t dim,
                                        const float* shift, const float* scale,
                                        int64_t mod_row_stride, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float* sh = shift + r * mod_row_stride;
    const float* sc = scale + r * mod_row_stride;
    const RowStats s = layer_norm_stats(xr, dim, eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double v = (xr[i] - s.mean) * s.rstd;
      yr[i] = static_cast<float>(v * (1.0 + sc[i]) + sh[i]);
    }
  }
}

void layer_norm_modulate_rows_bf16_reference(const float* x, BFloat16* y, int64_t rows, int64_t dim,
                                             const float* shift, const float* scale,
                                             int64_t mod_row_stride, float eps) {
  std::vector<float> row(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    layer_norm_modulate_rows_reference(x + r * dim, row.data(), 1, dim, shift + r * mod_row_stride,
                                       scale + r * mod_row_stride, 0, eps);
    for (int64_t i = 0; i < dim; ++i)
      y[r * dim + i].bits = f32_to_bf16(row[static_cast<size_t>(i)]);
  }
}

void rms_norm_rows_reference(const float* x, float* y, int64_t rows, int64_t dim,
                             const float* weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sq = 0;
    for (int64_t i = 0; i < dim; ++i) sq += static_cast<double>(xr[i]) * xr[i];
    const double rs = 1.0 / std::sqrt(sq / static_cast<double>(dim) + static_cast<double>(eps));
    for (int64_t i = 0; i < dim; ++i) {
      double v = xr[i] * rs;
      if (weight != nullptr) v *= weight[i];
      yr[i] = static_cast<float>(v);
    }
  }
}

void gated_residual_add_rows_reference(float* x, const float* y, const float* gate, int64_t rows,
                                       int64_t dim, int64_t gate_row_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) {
      const float product = y[r * dim + i] * gate[r * gate_row_stride + i];
      x[r * dim + i] = x[r * dim + i] + product;
    }
  }
}

void add_rows_reference(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] + y[i];
}

void gelu_tanh_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double u =
        static_cast<double>(kGeluBeta) * (v + static_cast<double>(kGeluKappa) * v * v * v);
    // 0.5 v (1 + tanh(u)) == v / (1 + exp(-2u)); the latter has no cancellation for v < 0.
    y[i] = static_cast<float>(v / (1.0 + std::exp(-2.0 * u)));
  }
}

void gelu_erf_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    // 0.5 v (1 + erf(v / sqrt 2)) == 0.5 v erfc(-v / sqrt 2).
    y[i] = static_cast<float>(0.5 * v * std::erfc(-v / std::sqrt(2.0)));
  }
}

void silu_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(v / (1.0 + std::exp(-v)));
  }
}

void exp_f32_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::exp(static_cast<double>(x[i])));
}

void tanh_f32_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::tanh(static_cast<double>(x[i])));
}

void erf_f32_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::erf(static_cast<double>(x[i])));
}

}  // namespace vidax
