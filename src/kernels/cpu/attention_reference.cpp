#include "kernels/cpu/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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
      // The last key stands for kv_last_repeat identical keys: its term counts that many times.
      const double repeat = static_cast<double>(d.kv_last_repeat);
      sum += (repeat - 1) * scores.back();
      scores.back() *= repeat;
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

void masked_attention_reference(const float* q, const float* k, const float* v, float* out,
                                const BlockPartition& qp, const BlockPartition& kp,
                                const BlockMask& mask, const TilePredicate& predicate,
                                const BlockSparseDims& d) {
  const int64_t hd = d.head_dim, row = d.heads * hd, nk = kp.tokens();
  const int64_t kv_valid = d.kv_valid > 0 ? d.kv_valid : nk;
  std::vector<uint8_t> keep, tile;
  std::vector<double> scores(static_cast<size_t>(nk)), acc(static_cast<size_t>(hd));
  for (int64_t h = 0; h < d.heads; ++h) {
    for (int64_t qb = 0; qb < qp.blocks(); ++qb) {
      const int64_t q0 = qp.begin(qb), nq = qp.size(qb);
      // keep[i][j] for the block's queries and every key.
      keep.assign(static_cast<size_t>(nq * nk), 0);
      for (int64_t kb = 0; kb < kp.blocks(); ++kb) {
        const TileClass c = mask.get(h, qb, kb);
        if (c == TileClass::kSkip) continue;
        const int64_t k0 = kp.begin(kb), nkb = kp.size(kb);
        tile.assign(static_cast<size_t>(nq * nkb), 1);
        if (c == TileClass::kBoundary) predicate(h, q0, nq, k0, nkb, tile.data());
        for (int64_t i = 0; i < nq; ++i)
          for (int64_t j = 0; j < nkb; ++j)
            keep[static_cast<size_t>(i * nk + k0 + j)] = tile[static_cast<size_t>(i * nkb + j)];
      }
      for (int64_t i = 0; i < nq; ++i) {
        const float* qi = q + (q0 + i) * row + h * hd;
        double m = -std::numeric_limits<double>::infinity();
        bool any = false;
        for (int64_t j = 0; j < kv_valid; ++j) {
          if (!keep[static_cast<size_t>(i * nk + j)]) continue;
          const float* kj = k + j * row + h * hd;
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c) dot += static_cast<double>(qi[c]) * kj[c];
          scores[static_cast<size_t>(j)] = dot * static_cast<double>(d.scale);
          m = std::max(m, scores[static_cast<size_t>(j)]);
          any = true;
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        for (int64_t j = 0; any && j < kv_valid; ++j) {
          if (!keep[static_cast<size_t>(i * nk + j)]) continue;
          const double p = std::exp(scores[static_cast<size_t>(j)] - m);
          sum += p;
          const float* vj = v + j * row + h * hd;
          for (int64_t c = 0; c < hd; ++c) acc[static_cast<size_t>(c)] += p * vj[c];
        }
        float* oi = out + (q0 + i) * row + h * hd;
        for (int64_t c = 0; c < hd; ++c)
          oi[c] = any ? static_cast<float>(acc[static_cast<size_t>(c)] / sum) : 0.0f;
      }
    }
  }
}

}  // namespace vidax
