// Plain-loop references for the attention-mass kernels (chunk_attention_mass_reference is also
// the fallback without AVX-512).
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/cpu/attention_mass.h"
#include "kernels/cpu/elementwise.h"

namespace vidax {

void chunk_attention_mass_reference(float* pc, int64_t m, int64_t r, float scale,
                                    const uint64_t* const* bits, int64_t sets, int64_t words,
                                    const ChunkMassOut& out) {
  for (int64_t i = 0; i < r; ++i) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < m; ++j) mx = std::max(mx, pc[j * r + i]);
    out.mx[i] = mx * scale;  // scale > 0
  }
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < r; ++i) pc[j * r + i] = pc[j * r + i] * scale - out.mx[i];
  exp_f32(pc, pc, m * r);
  std::fill(out.sum, out.sum + r, 0.0f);
  std::fill(out.kept, out.kept + sets * r, 0.0f);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < r; ++i) {
      const float e = pc[j * r + i];
      out.sum[i] += e;
      for (int64_t s = 0; s < sets; ++s)
        if ((bits[s][j * words + i / 64] >> (i % 64)) & 1u) out.kept[s * r + i] += e;
    }
}

void bf16_pair_scores_reference(const uint32_t* kp, int64_t m, int64_t dpairs, const uint32_t* qp,
                                int64_t r, float* pc) {
  const int64_t rpad = (r + 15) / 16 * 16;
  auto widen = [](uint32_t half) {
    const uint32_t u = half << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < r; ++i) {
      float acc = 0.0f;
      for (int64_t p = 0; p < dpairs; ++p) {
        const uint32_t k = kp[j * dpairs + p], q = qp[p * rpad + i];
        acc += widen(k >> 16) * widen(q >> 16);  // vdpbf16ps adds the odd channel first
        acc += widen(k & 0xffffu) * widen(q & 0xffffu);
      }
      pc[j * r + i] = acc;
    }
}

}  // namespace vidax
