// AVX-512 forms of the key-selection loops, chosen at run time; in `perf` the plain loops'
// compiled forms cost several times more (docs/sparse-attention.md).
#include "kernels/cpu/key_select.h"

#include <immintrin.h>

#include <bit>

// GCC 12 warns inside its own AVX-512 intrinsic headers (their _mm512_undefined_* helpers).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vidax {
namespace {

#define VIDAX_SELECT_AVX512 __attribute__((target("avx512f,popcnt")))

bool use_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
  return yes;
}

// The lanes of a 16-wide step at i that lie below n.
inline __mmask16 tail_mask(int64_t n, int64_t i) {
  return static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
}

VIDAX_SELECT_AVX512 int64_t count_at_least_avx512(const uint32_t* key, int64_t n, uint32_t t) {
  const __m512i vt = _mm512_set1_epi32(static_cast<int>(t));
  int64_t c = 0, i = 0;
  for (; i + 16 <= n; i += 16)
    c += std::popcount(
        static_cast<unsigned>(_mm512_cmpge_epu32_mask(_mm512_loadu_si512(key + i), vt)));
  if (i < n) {
    const __mmask16 m = tail_mask(n, i);
    c += std::popcount(static_cast<unsigned>(
        _mm512_mask_cmpge_epu32_mask(m, _mm512_maskz_loadu_epi32(m, key + i), vt)));
  }
  return c;
}

VIDAX_SELECT_AVX512 int64_t mark_above_avx512(const uint32_t* key, int64_t n, uint32_t t,
                                              uint64_t* bits) {
  const __m512i vt = _mm512_set1_epi32(static_cast<int>(t));
  int64_t count = 0;
  for (int64_t w = 0; w * 64 < n; ++w) {
    uint64_t word = 0;
    for (int64_t q = 0; q < 4; ++q) {
      const int64_t i = w * 64 + q * 16;
      if (i >= n) break;
      const __mmask16 m = tail_mask(n, i);
      const __mmask16 gt =
          _mm512_mask_cmpgt_epu32_mask(m, _mm512_maskz_loadu_epi32(m, key + i), vt);
      word |= static_cast<uint64_t>(gt) << (16 * q);
    }
    bits[w] |= word;
    count += std::popcount(word);
  }
  return count;
}

VIDAX_SELECT_AVX512 void float_keys_avx512(const float* x, int64_t n, uint32_t* key, uint32_t* lo,
                                           uint32_t* hi) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  __m512i mn = _mm512_set1_epi32(-1), mx = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n, i);
    const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_setzero_ps());
    const __m512i u = _mm512_castps_si512(v);
    const __m512i flip = _mm512_or_si512(_mm512_srai_epi32(u, 31), sign);
    const __mmask16 ordered = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    const __m512i k = _mm512_maskz_xor_epi32(ordered, u, flip);  // NaN: 0
    _mm512_mask_storeu_epi32(key + i, m, k);
    mn = _mm512_mask_min_epu32(mn, m, mn, k);
    mx = _mm512_mask_max_epu32(mx, m, mx, k);
  }
  *lo = _mm512_reduce_min_epu32(mn);
  *hi = _mm512_reduce_max_epu32(mx);
}

VIDAX_SELECT_AVX512 int64_t keys_in_bucket_avx512(const uint32_t* key, int64_t n, uint32_t t,
                                                  int shift, uint32_t* out, int64_t* above) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(t >> shift));
  const __m128i count = _mm_cvtsi32_si128(shift);
  int64_t m = 0, a = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = tail_mask(n, i);
    const __m512i k = _mm512_maskz_loadu_epi32(valid, key + i);
    const __m512i h = _mm512_srl_epi32(k, count);
    a += std::popcount(static_cast<unsigned>(_mm512_mask_cmpgt_epu32_mask(valid, h, high)));
    const __mmask16 eq = _mm512_mask_cmpeq_epu32_mask(valid, h, high);
    _mm512_mask_compressstoreu_epi32(out + m, eq, k);
    m += std::popcount(static_cast<unsigned>(eq));
  }
  *above = a;
  return m;
}

// The compiler's own AVX-512 form of the plain loop (the order of the sum is kept).
__attribute__((target_clones("avx512f", "default"))) double sum_at_least_clones(const uint64_t* key,
                                                                                const double* w,
                                                                                int64_t n,
                                                                                uint64_t t) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += key[i] >= t ? w[i] : 0.0;
  return s;
}

}  // namespace

void float_order_keys(const float* x, int64_t n, uint32_t* key, uint32_t* lo, uint32_t* hi) {
  if (use_avx512())
    float_keys_avx512(x, n, key, lo, hi);
  else
    float_order_keys_reference(x, n, key, lo, hi);
}

int64_t count_keys_at_least(const uint32_t* key, int64_t n, uint32_t t) {
  return use_avx512() ? count_at_least_avx512(key, n, t) : count_keys_at_least_reference(key, n, t);
}

int64_t mark_keys_above(const uint32_t* key, int64_t n, uint32_t t, uint64_t* bits) {
  return use_avx512() ? mark_above_avx512(key, n, t, bits)
                      : mark_keys_above_reference(key, n, t, bits);
}

int64_t keys_in_bucket(const uint32_t* key, int64_t n, uint32_t t, int shift, uint32_t* out,
                       int64_t* above) {
  return use_avx512() ? keys_in_bucket_avx512(key, n, t, shift, out, above)
                      : keys_in_bucket_reference(key, n, t, shift, out, above);
}

double sum_at_least(const uint64_t* key, const double* w, int64_t n, uint64_t t) {
  return sum_at_least_clones(key, w, n, t);
}

}  // namespace vidax
