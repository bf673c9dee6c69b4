// AVX-512 forms of the attention-mass kernels; chunk_attention_mass falls back to its reference
// where the CPU lacks AVX-512F.
#include "kernels/cpu/attention_mass.h"

#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"

namespace vidax {
namespace {

#define VIDAX_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq")))
#define VIDAX_AVX512_BF16 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bf16")))

inline __mmask16 tail_mask(int64_t r, int64_t i0) {
  return static_cast<__mmask16>(r - i0 >= 16 ? 0xffff : (1u << (r - i0)) - 1);
}

VIDAX_AVX512 void chunk_mass_avx512(float* pc, int64_t m, int64_t r, float scale,
                                    const uint64_t* const* bits, int64_t sets, int64_t words,
                                    const ChunkMassOut& out) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i0 = 0; i0 < r; i0 += 16) {
    const __mmask16 k = tail_mask(r, i0);
    __m512 v = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < m; ++j)
      v = _mm512_mask_max_ps(v, k, v, _mm512_maskz_loadu_ps(k, pc + j * r + i0));
    v = _mm512_mul_ps(v, vs);
    _mm512_mask_storeu_ps(out.mx + i0, k, v);
    for (int64_t j = 0; j < m; ++j) {
      float* at = pc + j * r + i0;
      _mm512_mask_storeu_ps(at, k, _mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, at), vs, v));
    }
  }
  exp_f32(pc, pc, m * r);
  for (int64_t i0 = 0; i0 < r; i0 += 16) {
    const __mmask16 k = tail_mask(r, i0);
    const int64_t word = i0 / 64, shift = i0 % 64;
    __m512 total = _mm512_setzero_ps();
    __m512 kept[8];
    for (int64_t s = 0; s < sets; ++s) kept[s] = _mm512_setzero_ps();
    for (int64_t j = 0; j < m; ++j) {
      const __m512 e = _mm512_maskz_loadu_ps(k, pc + j * r + i0);
      total = _mm512_add_ps(total, e);
      for (int64_t s = 0; s < sets; ++s) {
        const auto in = static_cast<__mmask16>(bits[s][j * words + word] >> shift);
        kept[s] = _mm512_mask_add_ps(kept[s], in, kept[s], e);
      }
    }
    _mm512_mask_storeu_ps(out.sum + i0, k, total);
    for (int64_t s = 0; s < sets; ++s) _mm512_mask_storeu_ps(out.kept + s * r + i0, k, kept[s]);
  }
}

// NV * 16 query lanes from i0 on, kPairScoreKeys keys per register tile.
template <int NV>
VIDAX_AVX512_BF16 void score_tile_dpbf16(const uint32_t* kp, int64_t m, int64_t dpairs,
                                         const uint32_t* qp, int64_t rpad, int64_t i0, int64_t r,
                                         float* pc) {
  for (int64_t j0 = 0; j0 < m; j0 += kPairScoreKeys) {
    __m512 acc[kPairScoreKeys][NV];
    for (auto& row : acc)
      for (auto& a : row) a = _mm512_setzero_ps();
    for (int64_t p = 0; p < dpairs; ++p) {
      __m512i qv[NV];
      for (int v = 0; v < NV; ++v) qv[v] = _mm512_loadu_si512(qp + p * rpad + i0 + 16 * v);
      for (int64_t jj = 0; jj < kPairScoreKeys; ++jj) {
        const __m512i kb = _mm512_set1_epi32(static_cast<int>(kp[(j0 + jj) * dpairs + p]));
        for (int v = 0; v < NV; ++v)
          acc[jj][v] = _mm512_dpbf16_ps(acc[jj][v], (__m512bh)kb, (__m512bh)qv[v]);
      }
    }
    for (int64_t jj = 0; jj < kPairScoreKeys && j0 + jj < m; ++jj)
      for (int v = 0; v < NV; ++v) {
        const int64_t lane0 = i0 + 16 * v;
        _mm512_mask_storeu_ps(pc + (j0 + jj) * r + lane0, tail_mask(r, lane0), acc[jj][v]);
      }
  }
}

}  // namespace

void chunk_attention_mass(float* scores, int64_t m, int64_t r, float scale,
                          const uint64_t* const* bits, int64_t sets, int64_t words,
                          const ChunkMassOut& out) {
  if (cpu_has_avx512f())
    chunk_mass_avx512(scores, m, r, scale, bits, sets, words, out);
  else
    chunk_attention_mass_reference(scores, m, r, scale, bits, sets, words, out);
}

void bf16_pair_scores(const uint32_t* kp, int64_t m, int64_t dpairs, const uint32_t* qp, int64_t r,
                      float* pc) {
  const int64_t rpad = (r + 15) / 16 * 16;
  for (int64_t i0 = 0; i0 < rpad; i0 += 64) {
    switch (std::min<int64_t>(4, (rpad - i0) / 16)) {
      case 1:
        score_tile_dpbf16<1>(kp, m, dpairs, qp, rpad, i0, r, pc);
        break;
      case 2:
        score_tile_dpbf16<2>(kp, m, dpairs, qp, rpad, i0, r, pc);
        break;
      case 3:
        score_tile_dpbf16<3>(kp, m, dpairs, qp, rpad, i0, r, pc);
        break;
      default:
        score_tile_dpbf16<4>(kp, m, dpairs, qp, rpad, i0, r, pc);
    }
  }
}

}  // namespace vidax
