#include "sparse/estimator_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
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
  std::vector<float> q(static_cast<size_t>(r) * ud), k(static_cast<size_t>(n) * ud);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t c = 0; c < d; ++c)
      q[static_cast<size_t>(i) * ud + static_cast<size_t>(c)] =
          call.q[rows[static_cast<size_t>(i)] * call.stride + head * d + c] * scale;
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j)
    std::copy_n(call.k + j * call.stride + head * d, d, &k[static_cast<size_t>(j) * ud]);
  // scores^T [tokens, rows] = K . Q^T, Q the small packed side.
  std::vector<float> st(static_cast<size_t>(n * r));
  gemm_abt(k.data(), n, q.data(), r, d, st.data());
  probs.resize(static_cast<size_t>(r * n));
  // Transpose in tiles of 64 tokens (a row-by-row gather would stride through all of st).
  constexpr int64_t kTile = 64;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int64_t j1 = std::min(n, j0 + kTile);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = j0; j < j1; ++j)
        probs[static_cast<size_t>(i * n + j)] = st[static_cast<size_t>(j * r + i)];
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < r; ++i) {
    float* p = &probs[static_cast<size_t>(i * n)];
    const float mx = *std::max_element(p, p + n);
    for (int64_t j = 0; j < n; ++j) p[j] -= mx;
    exp_f32(p, p, n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += p[j];
    const auto inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) p[j] *= inv;
  }
}

}  // namespace vidax::sparse
