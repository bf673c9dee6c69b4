// Cut values by bitwise search: with integer keys that order like the values, the cut T is built
// from the top bit down, keeping a bit when the rows at or above the candidate still satisfy the
// condition (count >= k, or mass >= target). Each step is one vectorised pass over the row
// (kernels/cpu/key_select.h: AVX-512 where the machine has it), ~log2 of the key range passes.
#include "sparse/block_select.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <vector>

#include "kernels/cpu/key_select.h"

namespace vidax::sparse {
namespace {

void mark(uint64_t* bits, int64_t i) { bits[i / 64] |= uint64_t{1} << (i % 64); }

std::atomic<bool> force_portable{false};

// The key kernels, or their plain-loop references when tests force the portable path.
bool portable() { return force_portable.load(std::memory_order_relaxed); }

void float_keys(const float* x, int64_t n, uint32_t* key, uint32_t* lo, uint32_t* hi) {
  if (portable())
    float_order_keys_reference(x, n, key, lo, hi);
  else
    float_order_keys(x, n, key, lo, hi);
}

int64_t count_at_least(const uint32_t* key, int64_t n, uint32_t t) {
  return portable() ? count_keys_at_least_reference(key, n, t) : count_keys_at_least(key, n, t);
}

int64_t mark_above(const uint32_t* key, int64_t n, uint32_t t, uint64_t* bits) {
  return portable() ? mark_keys_above_reference(key, n, t, bits) : mark_keys_above(key, n, t, bits);
}

int64_t bucket(const uint32_t* key, int64_t n, uint32_t t, int shift, uint32_t* out,
               int64_t* above) {
  return portable() ? keys_in_bucket_reference(key, n, t, shift, out, above)
                    : keys_in_bucket(key, n, t, shift, out, above);
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
  thread_local std::vector<uint32_t> key, cell;
  key.resize(static_cast<size_t>(n));
  cell.resize(static_cast<size_t>(n));
  uint32_t lo = 0, hi = 0;
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
    const int64_t m = bucket(key.data(), n, t, shift, cell.data(), &above);
    for (; b != 0; b >>= 1)
      if (above + count_keys_at_least_reference(cell.data(), m, t | b) >= k) t |= b;
  }
  // t is now the k-th largest key: fewer than k keys are above it.
  int64_t taken = mark_above(key.data(), n, t, bits);
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
  if (sum_at_least(key.data(), w.data(), n, t) < target) {  // short by rounding: all
    for (int64_t i = 0; i < n; ++i) mark(bits, i);
    return;
  }
  // Invariant: the keys >= t carry at least the target mass; t ends as the largest such value.
  const uint64_t top = free ? (free >> 1) + 1 : 0;
  for (uint64_t b = top; b != 0; b >>= 1)
    if (sum_at_least(key.data(), w.data(), n, t | b) >= target) t |= b;
  // Everything above t (less than the target together), then the ties at t by index.
  mark_keys_above(key.data(), n, t, bits);
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
