// The per-call pass of channel-group reuse (accel/kaleido.h) for its emulation: which 32-channel
// groups of each row moved since the reference input, the reference brought up to date where
// they did, and the per-channel sums of squares for the next call's threshold. One pass over x,
// vectorized per CPU (target_clones: AVX-512, AVX2, baseline). On AMX machines the delta path
// does the same inside its GEMM (amx_reuse_gemm.h), with the same decisions and sums.
// Thread-safety: pure functions of their arguments (OpenMP over rows inside).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vidax {

inline constexpr int64_t kChannelGroup = 32;

// x, ref: [rows, k] (ref updated in place). limit: [k] per-channel allowance. changed:
// [rows, ceil(k / 32)] out, 1 where a channel of the group moved by more than its limit (in f32:
// |x - ref| - limit > 0). sumsq: [k] out, the per-channel sum of x^2 over the rows, summed per
// 32-row block in row order and then over the blocks in order (the same for every thread count,
// and amx_gemm_bf16_reuse's order). Returns the number of groups that did not move.
int64_t channel_group_update(const BFloat16* x, BFloat16* ref, int64_t rows, int64_t k,
                             const float* limit, uint8_t* changed, float* sumsq);
int64_t channel_group_update(const float* x, float* ref, int64_t rows, int64_t k,
                             const float* limit, uint8_t* changed, float* sumsq);

// The per-channel sum of x^2 over the rows alone (the first call), in the same order.
void channel_sumsq(const BFloat16* x, int64_t rows, int64_t k, float* sumsq);
void channel_sumsq(const float* x, int64_t rows, int64_t k, float* sumsq);

}  // namespace vidax
