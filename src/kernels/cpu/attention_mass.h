// Kernels for the attention mass sampled query rows give to sets of keys (the routing estimate
// of Sparse VideoGen, sparse/estimator_math.h), one chunk of keys at a time:
//   - chunk_attention_mass: from a chunk's scores [m keys, r rows], the per-row maximum, the sum
//     of exp(scale * score - max) over the chunk, and the same sum over each key set;
//   - bf16_pair_scores: a chunk's scores from keys and queries packed as bf16 pairs, on the
//     AVX512-BF16 dot-product unit (vdpbf16ps).
// chunk_attention_mass uses AVX-512 where the CPU has it, plain loops otherwise; each kernel has a
// plain-loop `_reference` twin in attention_mass_reference.cpp (equal up to f32 rounding: the
// AVX-512 forms fuse multiply-adds). Reentrant; no threads of their own.
#pragma once

#include <cstdint>

namespace vidax {

// Per-chunk results: mx[i] = scale * max_j score[j, i]; sum[i] = sum_j exp(scale * score[j, i] -
// mx[i]); kept[s * r + i] = the same sum over the keys j of set s of row i.
struct ChunkMassOut {
  float* mx;
  float* sum;
  float* kept;
};

// scores [m, r] (overwritten by the exponentials), scale > 0. bits[s] points at set s's bitmap
// rows of the chunk's first key ([m][words], bit i of key j's words: key j in row i's set), for
// s < sets (1..8).
void chunk_attention_mass(float* scores, int64_t m, int64_t r, float scale,
                          const uint64_t* const* bits, int64_t sets, int64_t words,
                          const ChunkMassOut& out);
void chunk_attention_mass_reference(float* scores, int64_t m, int64_t r, float scale,
                                    const uint64_t* const* bits, int64_t sets, int64_t words,
                                    const ChunkMassOut& out);

// Keys per register tile of bf16_pair_scores: packed key rows are padded to a multiple of it.
inline constexpr int64_t kPairScoreKeys = 4;

// scores[j * r + i] = sum_p kp[j][p] . qp[p][i] for j < m, i < r: each uint32 holds a bf16 pair
// (low half the even channel), products summed in f32, the odd channel's first. kp
// [round_up(m, kPairScoreKeys)][dpairs] (rows past m zero), qp [dpairs][round_up(r, 16)]
// (columns past r zero). bf16_pair_scores needs AVX512-BF16 (cpu_has_avx512_bf16()).
void bf16_pair_scores(const uint32_t* kp, int64_t m, int64_t dpairs, const uint32_t* qp, int64_t r,
                      float* scores);
void bf16_pair_scores_reference(const uint32_t* kp, int64_t m, int64_t dpairs, const uint32_t* qp,
                                int64_t r, float* scores);

}  // namespace vidax
