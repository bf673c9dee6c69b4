// Cut values by bitwise search: with integer keys that order like the values, the cut T is built
// from the top bit down, keeping a bit when the rows at or above the candidate still satisfy the
// condition (count >= k, or mass >= target). Each step is one vectorised pass over the row
// (AVX-512 where the machine has it), ~log2 of the key range passes in all.
#include "sparse/block_select.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

// GCC 12 warns inside its own AVX-512 intrinsic headers (their _mm512_undefined_* helpers).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vidax::sparse {
namespace {

void mark(uint64_t* bits, int64_t i) { bits[i / 64] |= uint64_t{1} << (i % 64); }

// Order-preserving keys of floats (NaN sorts below everything, -0 ties with +0); the portable
// form of float_keys_avx512.
void float_keys(const float* x, int64_t n, uint32_t* key, uint32_t* lo, uint32_t* hi) {
  uint32_t mn = ~0u, mx = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] + 0.0f;  // -0 + 0 = +0
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    const auto neg = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31);
    u ^= neg | 0x80000000u;  // negative: all bits flipped; positive: the sign bit set
    u = v == v ? u : 0u;
    key[i] = u;
    mn = std::min(mn, u);
    mx = std::max(mx, u);
  }
  *lo = mn;
  *hi = mx;
}

// bits |= (key[i] > t) for i < n, branch-free; returns how many were set.
template <class K>
int64_t mark_above(const K* key, int64_t n, K t, uint64_t* bits) {
  int64_t count = 0;
  for (int64_t w = 0; w * 64 < n; ++w) {
    const K* kw = key + w * 64;
    const int64_t m = std::min<int64_t>(64, n - w * 64);
    uint64_t word = 0;
    for (int64_t j = 0; j < m; ++j) word |= static_cast<uint64_t>(kw[j] > t) << j;
    bits[w] |= word;
    count += std::popcount(word);
  }
  return count;
}

int64_t count_at_least_scalar(const uint32_t* key, int64_t n, uint32_t t) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += key[i] >= t ? 1 : 0;
  return c;
}

// AVX-512 forms of the hot loops (keys, counts, bucket, marking), chosen at run time; in `perf`
// the plain loops' compiled forms cost several times more (docs/sparse-attention.md).
#define VIDAX_SELECT_AVX512 __attribute__((target("avx512f,popcnt")))

VIDAX_SELECT_AVX512 int64_t count_at_least_avx512(const uint32_t* key, int64_t n, uint32_t t) {
  const __m512i vt = _mm512_set1_epi32(static_cast<int>(t));
  int64_t c = 0, i = 0;
  for (; i + 16 <= n; i += 16)
    c += std::popcount(
        static_cast<unsigned>(_mm512_cmpge_epu32_mask(_mm512_loadu_si512(key + i), vt)));
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
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
      const auto m = static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
      const __mmask16 gt =
          _mm512_mask_cmpgt_epu32_mask(m, _mm512_maskz_loadu_epi32(m, key + i), vt);
      word |= static_cast<uint64_t>(gt) << (16 * q);
    }
    bits[w] |= word;
    count += std::popcount(word);
  }
  return count;
}

std::atomic<bool> force_portable{false};

bool use_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
  return yes && !force_portable.load(std::memory_order_relaxed);
}

int64_t count_at_least(const uint32_t* key, int64_t n, uint32_t t) {
  return use_avx512() ? count_at_least_avx512(key, n, t) : count_at_least_scalar(key, n, t);
}

VIDAX_SELECT_AVX512 void float_keys_avx512(const float* x, int64_t n, uint32_t* key, uint32_t* lo,
                                           uint32_t* hi) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  __m512i mn = _mm512_set1_epi32(-1), mx = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 16) {
    const auto m = static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
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
    const auto valid = static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1);
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

// Keys of `key` whose bits above `shift` equal t's, packed into out; returns their number and
// sets *above to the count of keys whose high bits exceed t's.
int64_t keys_in_bucket(const uint32_t* key, int64_t n, uint32_t t, int shift, uint32_t* out,
                       int64_t* above) {
  const uint32_t high = t >> shift;
  int64_t m = 0, a = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = key[i] >> shift;
    a += h > high ? 1 : 0;
    out[m] = key[i];
    m += h == high ? 1 : 0;
  }
  *above = a;
  return m;
}

__attribute__((target_clones("avx512f", "default"))) double mass_at_least(const uint64_t* key,
                                                                          const double* w,
                                                                          int64_t n, uint64_t t) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += key[i] >= t ? w[i] : 0.0;
  return s;
}

// The highest bit where lo and hi differ, as a mask of it and everything below (0 if equal).
template <class U>
U differing_bits(U lo, U hi) {
  const U x = lo ^ hi;
  if (x == 0) return 0;
  const int top = static_cast<int>(sizeof(U) * 8) - 1 - std::countl_zero(x);
  return static_cast<U>((U{1} << top) | ((U{1} << top) - 1));
}

}  // namespace

void select_top_k(const float* score, int64_t n, int64_t k, uint64_t* bits) {
  if (n <= 0 || k <= 0) return;
  if (k >= n) {
    for (int64_t i = 0; i < n; ++i) mark(bits, i);
    return;
  }
  thread_local std::vector<uint32_t> key, bucket;
  key.resize(static_cast<size_t>(n));
  bucket.resize(static_cast<size_t>(n));
  uint32_t lo = 0, hi = 0;
  if (use_avx512())
    float_keys_avx512(score, n, key.data(), &lo, &hi);
  else
    float_keys(score, n, key.data(), &lo, &hi);
  // Invariant: at least k keys are >= t. Every key shares the bits above the first one where lo
  // and hi differ, so t starts as that common prefix (all n keys are >= it).
  const uint32_t free = differing_bits(lo, hi);
  uint32_t t = lo & ~free;
  uint32_t b = free ? (free >> 1) + 1 : 0;  // the highest free bit
  // The 12 highest free bits over all keys (cells of 1/4096 of the row's key range)...
  const int shift = b ? std::max(0, static_cast<int>(std::bit_width(b)) - 1 - 11) : 0;
  for (; b >= (1u << shift) && b != 0; b >>= 1)
    if (count_at_least(key.data(), n, t | b) >= k) t |= b;
  // ...then the rest over the few keys that share them with t (the k-th key is one of them).
  if (b != 0) {
    int64_t above = 0;
    const int64_t m = use_avx512()
                          ? keys_in_bucket_avx512(key.data(), n, t, shift, bucket.data(), &above)
                          : keys_in_bucket(key.data(), n, t, shift, bucket.data(), &above);
    for (; b != 0; b >>= 1)
      if (above + count_at_least_scalar(bucket.data(), m, t | b) >= k) t |= b;
  }
  // t is now the k-th largest key: fewer than k keys are above it.
  int64_t taken =
      use_avx512() ? mark_above_avx512(key.data(), n, t, bits) : mark_above(key.data(), n, t, bits);
  for (int64_t i = 0; i < n && taken < k; ++i)
    if (key[static_cast<size_t>(i)] == t) {
      mark(bits, i);
      ++taken;
    }
}

void select_top_p(const double* weight, int64_t n, double p, uint64_t* bits) {
  if (n <= 0 || !(p > 0)) return;
  if (p >= 1) {  // the whole row, whatever the rounding of its sum
    for (int64_t i = 0; i < n; ++i) mark(bits, i);
    return;
  }
  thread_local std::vector<uint64_t> key;
  thread_local std::vector<double> w;
  key.resize(static_cast<size_t>(n));
  w.resize(static_cast<size_t>(n));
  double total = 0;
  uint64_t lo = ~uint64_t{0}, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    // Non-negative doubles order like their bit patterns; anything else counts as weight 0.
    const double x = weight[i] > 0 ? weight[i] : 0.0;
    const auto u = std::bit_cast<uint64_t>(x);
    w[static_cast<size_t>(i)] = x;
    key[static_cast<size_t>(i)] = u;
    total += x;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  const double target = p * total;
  const uint64_t free = differing_bits(lo, hi);
  uint64_t t = lo & ~free;
  if (mass_at_least(key.data(), w.data(), n, t) < target) {  // short by rounding: all
    for (int64_t i = 0; i < n; ++i) mark(bits, i);
    return;
  }
  // Invariant: the keys >= t carry at least the target mass; t ends as the largest such value.
  const uint64_t top = free ? (free >> 1) + 1 : 0;
  for (uint64_t b = top; b != 0; b >>= 1)
    if (mass_at_least(key.data(), w.data(), n, t | b) >= target) t |= b;
  // Everything above t (less than the target together), then the ties at t by index.
  mark_above(key.data(), n, t, bits);
  double kept = 0;  // in index order, as the ties below continue it
  for (int64_t i = 0; i < n; ++i)
    kept += key[static_cast<size_t>(i)] > t ? w[static_cast<size_t>(i)] : 0.0;
  for (int64_t i = 0; i < n && kept < target; ++i)
    if (key[static_cast<size_t>(i)] == t) {
      mark(bits, i);
      kept += w[static_cast<size_t>(i)];
    }
}

void block_select_force_portable(bool on) { force_portable = on; }

}  // namespace vidax::sparse
