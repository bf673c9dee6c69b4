#include "kernels/cpu/attention_lse.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vidax {

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
