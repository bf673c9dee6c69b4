#include "kernels/cpu/attention_lse.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace vidax {
namespace {

inline float widen(float x) { return x; }
inline float widen(BFloat16 x) { return bf16_to_f32(x.bits); }

template <typename T>
void run(const T* q, const T* k, const T* v, float* out, float* lse, const ChunkAttentionDims& d) {
  VIDAX_CHECK(d.q_len >= 0 && d.kv_valid >= 0 && d.heads > 0 && d.head_dim > 0,
              "attention_with_lse dims");
  const int64_t hd = d.head_dim;
  constexpr int64_t kBlock = 64;
  const float neg_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel
  {
    std::vector<float> qrow(static_cast<size_t>(hd)), acc(static_cast<size_t>(hd)),
        s(static_cast<size_t>(kBlock)), vrow(static_cast<size_t>(hd));
#pragma omp for schedule(static) collapse(2)
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t i = 0; i < d.q_len; ++i) {
        float* o = out + i * d.out_stride + h * hd;
        for (int64_t c = 0; c < hd; ++c)
          qrow[static_cast<size_t>(c)] = widen(q[i * d.q_stride + h * hd + c]);
        std::fill(acc.begin(), acc.end(), 0.0f);
        float m = neg_inf, l = 0.0f;
        for (int64_t j0 = 0; j0 < d.kv_valid; j0 += kBlock) {
          const int64_t n = std::min(kBlock, d.kv_valid - j0);
          float bm = neg_inf;
          for (int64_t j = 0; j < n; ++j) {
            const T* kr = k + (j0 + j) * d.k_stride + h * hd;
            float dot = 0.0f;
            for (int64_t c = 0; c < hd; ++c) dot += qrow[static_cast<size_t>(c)] * widen(kr[c]);
            s[static_cast<size_t>(j)] = dot * d.scale;
            bm = std::max(bm, s[static_cast<size_t>(j)]);
          }
          const float m_new = std::max(m, bm);
          const float corr = m == neg_inf ? 0.0f : std::exp(m - m_new);
          l *= corr;
          for (int64_t c = 0; c < hd; ++c) acc[static_cast<size_t>(c)] *= corr;
          for (int64_t j = 0; j < n; ++j) {
            const float p = std::exp(s[static_cast<size_t>(j)] - m_new);
            l += p;
            const T* vr = v + (j0 + j) * d.v_stride + h * hd;
            for (int64_t c = 0; c < hd; ++c) acc[static_cast<size_t>(c)] += p * widen(vr[c]);
          }
          m = m_new;
        }
        if (l > 0.0f) {
          const float inv = 1.0f / l;
          for (int64_t c = 0; c < hd; ++c) o[c] = acc[static_cast<size_t>(c)] * inv;
          lse[i * d.heads + h] = m + std::log(l);
        } else {
          for (int64_t c = 0; c < hd; ++c) o[c] = 0.0f;
          lse[i * d.heads + h] = neg_inf;
        }
      }
    }
  }
}

}  // namespace

void attention_with_lse(const float* q, const float* k, const float* v, float* out, float* lse,
                        const ChunkAttentionDims& d) {
  run(q, k, v, out, lse, d);
}

void attention_with_lse(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
                        float* lse, const ChunkAttentionDims& d) {
  run(q, k, v, out, lse, d);
}

void merge_attention_partial(float* out, float* lse, const float* part_out, const float* part_lse,
                             int64_t rows, int64_t heads, int64_t head_dim, int64_t out_stride,
                             int64_t part_stride) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      const float a = lse[i * heads + h], b = part_lse[i * heads + h];
      if (b == neg_inf) continue;
      float* o = out + i * out_stride + h * head_dim;
      const float* p = part_out + i * part_stride + h * head_dim;
      if (a == neg_inf) {
        std::copy_n(p, head_dim, o);
        lse[i * heads + h] = b;
        continue;
      }
      const float m = std::max(a, b);
      const float wa = std::exp(a - m), wb = std::exp(b - m);
      const float total = wa + wb;
      const float ca = wa / total, cb = wb / total;
      for (int64_t c = 0; c < head_dim; ++c) o[c] = o[c] * ca + p[c] * cb;
      lse[i * heads + h] = m + std::log(total);
    }
  }
}

}  // namespace vidax
