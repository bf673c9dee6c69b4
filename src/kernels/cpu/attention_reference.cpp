#include "kernels/cpu/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace vidax {

void attention_reference(const float* q, const float* k, const float* v, float* out,
                         const AttentionDims& d) {
  validate_attention_dims(d);
  std::vector<double> scores(static_cast<size_t>(d.kv_valid));  // one query row at a time
  std::vector<double> acc(static_cast<size_t>(d.head_dim));
  for (int64_t h = 0; h < d.heads; ++h) {
    const int64_t off = h * d.head_dim;
    for (int64_t i = 0; i < d.q_len; ++i) {
      const float* qi = q + i * d.q_stride + off;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < d.kv_valid; ++j) {
        const float* kj = k + j * d.k_stride + off;
        double dot = 0;
        for (int64_t c = 0; c < d.head_dim; ++c) dot += static_cast<double>(qi[c]) * kj[c];
        scores[static_cast<size_t>(j)] = dot * static_cast<double>(d.scale);
        m = std::max(m, scores[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (auto& s : scores) {
        s = std::exp(s - m);
        sum += s;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < d.kv_valid; ++j) {
        const float* vj = v + j * d.v_stride + off;
        const double p = scores[static_cast<size_t>(j)];
        for (int64_t c = 0; c < d.head_dim; ++c) acc[static_cast<size_t>(c)] += p * vj[c];
      }
      float* oi = out + i * d.out_stride + off;
      for (int64_t c = 0; c < d.head_dim; ++c) {
        oi[c] = static_cast<float>(acc[static_cast<size_t>(c)] / sum);
      }
    }
  }
}

}  // namespace vidax
