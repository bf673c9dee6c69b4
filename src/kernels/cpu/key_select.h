// Kernels for selecting the largest values of a row by bitwise search over order-preserving
// integer keys (the block selection of estimator-driven sparse masks, sparse/block_select.h):
// float -> key conversion with the key range, counts and masked sums of keys at or above a cut,
// the keys sharing a cut's high bits, and marking the keys above a cut in a bitmap.
//
// Each kernel uses AVX-512 where the CPU has it (chosen at run time) and plain loops otherwise;
// a `_reference` twin with plain loops lives in key_select_reference.cpp and returns the same
// values (bit for bit: only integer compares, and sums in index order). Reentrant, no threads.
#pragma once

#include <cstdint>

namespace vidax {

// key[i] orders like x[i] as unsigned integers: NaN -> 0 (below every number), -0 ties with +0;
// *lo / *hi = the smallest / largest key (n >= 1).
void float_order_keys(const float* x, int64_t n, uint32_t* key, uint32_t* lo, uint32_t* hi);
void float_order_keys_reference(const float* x, int64_t n, uint32_t* key, uint32_t* lo,
                                uint32_t* hi);

// The number of key[i] >= t.
int64_t count_keys_at_least(const uint32_t* key, int64_t n, uint32_t t);
int64_t count_keys_at_least_reference(const uint32_t* key, int64_t n, uint32_t t);

// bits[i / 64] |= (key[i] > t) << (i % 64) for i < n (ceil(n / 64) words, not cleared);
// returns how many bits were set.
int64_t mark_keys_above(const uint32_t* key, int64_t n, uint32_t t, uint64_t* bits);
int64_t mark_keys_above_reference(const uint32_t* key, int64_t n, uint32_t t, uint64_t* bits);
// The same for 64-bit keys (plain loops only).
int64_t mark_keys_above(const uint64_t* key, int64_t n, uint64_t t, uint64_t* bits);

// The keys whose bits above `shift` equal t's, packed in index order into out (room for n);
// returns their number and sets *above to the count of keys whose high bits exceed t's.
int64_t keys_in_bucket(const uint32_t* key, int64_t n, uint32_t t, int shift, uint32_t* out,
                       int64_t* above);
int64_t keys_in_bucket_reference(const uint32_t* key, int64_t n, uint32_t t, int shift,
                                 uint32_t* out, int64_t* above);

// The sum of w[i] over key[i] >= t, in index order.
double sum_at_least(const uint64_t* key, const double* w, int64_t n, uint64_t t);
double sum_at_least_reference(const uint64_t* key, const double* w, int64_t n, uint64_t t);

}  // namespace vidax
