// Plain-loop references for the key-selection kernels (also their fallback without AVX-512).
#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/cpu/key_select.h"

namespace vidax {
namespace {

// Branch-free, a 64-key word at a time.
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

}  // namespace

void float_order_keys_reference(const float* x, int64_t n, uint32_t* key, uint32_t* lo,
                                uint32_t* hi) {
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

int64_t count_keys_at_least_reference(const uint32_t* key, int64_t n, uint32_t t) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += key[i] >= t ? 1 : 0;
  return c;
}

int64_t mark_keys_above_reference(const uint32_t* key, int64_t n, uint32_t t, uint64_t* bits) {
  return mark_above(key, n, t, bits);
}

int64_t mark_keys_above(const uint64_t* key, int64_t n, uint64_t t, uint64_t* bits) {
  return mark_above(key, n, t, bits);
}

int64_t keys_in_bucket_reference(const uint32_t* key, int64_t n, uint32_t t, int shift,
                                 uint32_t* out, int64_t* above) {
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

double sum_at_least_reference(const uint64_t* key, const double* w, int64_t n, uint64_t t) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += key[i] >= t ? w[i] : 0.0;
  return s;
}

}  // namespace vidax
