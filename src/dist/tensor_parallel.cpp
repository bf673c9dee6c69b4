#include "dist/tensor_parallel.h"

#include <cmath>

#include "core/error.h"
#include "kernels/cpu/elementwise.h"

namespace vidax {

void tp_reduce_rows(dist::Group& tp, float* y, int64_t rows, int64_t n, const float* bias) {
  tp.all_reduce(y, rows * n, DType::kF32, dist::ReduceOp::kSum);
  if (bias == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * n;
    for (int64_t j = 0; j < n; ++j) yr[j] += bias[j];
  }
}

void tp_rms_norm(dist::Group* tp, float* x, int64_t rows, int64_t local_dim, int64_t stride,
                 int64_t full_dim, const float* weight, float eps, Buffer<float>& sums) {
  const int ranks = tp != nullptr ? tp->size() : 1;
  VIDAX_CHECK(local_dim * ranks == full_dim, "tp_rms_norm: ", local_dim, " columns x ", ranks,
              " ranks != ", full_dim);
  if (ranks == 1) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      rms_norm_rows(x + r * stride, x + r * stride, 1, local_dim, weight, eps);
    return;
  }
  sums.resize(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * stride;
    double sq = 0;
    for (int64_t i = 0; i < local_dim; ++i) sq += static_cast<double>(xr[i]) * xr[i];
    sums.data()[r] = static_cast<float>(sq);
  }
  tp->all_reduce(sums.data(), rows, DType::kF32, dist::ReduceOp::kSum);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * stride;
    const double rs =
        1.0 / std::sqrt(static_cast<double>(sums.data()[r]) / static_cast<double>(full_dim) +
                        static_cast<double>(eps));
    for (int64_t i = 0; i < local_dim; ++i)
      xr[i] = static_cast<float>(static_cast<double>(xr[i]) * rs * weight[i]);
  }
}

}  // namespace vidax
