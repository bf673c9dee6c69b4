#include "sparse/estimator_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <span>

#include "core/tensor.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"

namespace vidax::sparse {

void gemm_abt(const float* a, int64_t m, const float* b, int64_t n, int64_t k, float* c) {
  // b is the (small, reused) "weight" side of PackedLinear: y[m, n] = x[m, k] . W[n, k]^T.
  const Tensor w =
      Tensor::from_floats(std::span<const float>(b, static_cast<size_t>(n * k)), Shape{n, k});
  const PackedLinear lin(w, Tensor(), DType::kF32);
  lin.forward(a, m, c);
}

void sampled_attention_rows(const AttentionCall& call, int64_t head,
                            const std::vector<int64_t>& rows, std::vector<float>& probs) {
  const int64_t n = call.grid.tokens(), d = call.head_dim;
  const auto r = static_cast<int64_t>(rows.size());
  const auto ud = static_cast<size_t>(d);
  // [rows, head_dim] sampled queries (pre-scaled) and [tokens, head_dim] keys of this head.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> q(static_cast<size_t>(r) * ud);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t c = 0; c < d; ++c)
      q[static_cast<size_t>(i) * ud + static_cast<size_t>(c)] =
          call.q[rows[static_cast<size_t>(i)] * call.stride + head * d + c] * scale;
  std::unique_ptr<float[]> k(new float[static_cast<size_t>(n) * ud]);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j)
    std::copy_n(call.k + j * call.stride + head * d, d, &k[static_cast<size_t>(j) * ud]);
  // scores [tokens, rows] = K . Q^T, Q the small packed side.
  probs.resize(static_cast<size_t>(n * r));
  float* p = probs.data();
  gemm_abt(k.get(), n, q.data(), r, d, p);
  // Softmax down each column: maxima and sums accumulate across rows of r contiguous values.
  std::vector<float> mx(static_cast<size_t>(r), -std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < r; ++i)
      mx[static_cast<size_t>(i)] = std::max(mx[static_cast<size_t>(i)], p[j * r + i]);
  constexpr int64_t kChunk = 512;  // keys per parallel chunk
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(chunks * r), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t j0 = ch * kChunk, j1 = std::min(n, j0 + kChunk);
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = 0; i < r; ++i) p[j * r + i] -= mx[static_cast<size_t>(i)];
    exp_f32(p + j0 * r, p + j0 * r, (j1 - j0) * r);
    double* s = &part[static_cast<size_t>(ch * r)];
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = 0; i < r; ++i) s[i] += p[j * r + i];
  }
  std::vector<float> inv(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    double sum = 0;
    for (int64_t ch = 0; ch < chunks; ++ch) sum += part[static_cast<size_t>(ch * r + i)];
    inv[static_cast<size_t>(i)] = static_cast<float>(1.0 / sum);
  }
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < r; ++i) p[j * r + i] *= inv[static_cast<size_t>(i)];
}

}  // namespace vidax::sparse
