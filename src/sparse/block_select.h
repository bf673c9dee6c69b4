// Per-row block selection for estimator-driven masks (SPADE): the top-k key blocks of a row, or
// the shortest prefix of its descending order that carries a share p of its mass. Both find the
// cut value by a bitwise search over order-preserving integer keys (a vectorised count / masked
// sum per bit) instead of sorting or nth_element, so a row of ~700 blocks costs a few
// microseconds. Ties at the cut go to the lower block index, as a stable descending sort would.
#pragma once

#include <cstdint>

namespace vidax::sparse {

// Sets bit kb of `bits` (ceil(n / 64) words, not cleared here) for the min(k, n) largest of
// score[0..n) (k >= 1; k >= n takes all), ties by lower index; NaN sorts below every number.
void select_top_k(const float* score, int64_t n, int64_t k, uint64_t* bits);

// Sets the bits of the shortest prefix of the descending order of weight[0..n) (weights >= 0,
// ties by lower index) whose sum reaches p * total, total = the sum of all weights (negative or
// NaN weights count as 0). p <= 0 takes nothing, p >= 1 every block.
void select_top_p(const double* weight, int64_t n, double p, uint64_t* bits);

// For tests: true runs the portable loops even where AVX-512 exists.
void block_select_force_portable(bool on);

}  // namespace vidax::sparse
