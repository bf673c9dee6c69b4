// Sparse Forcing's persistent block-sparse attention (PBSA), in its training-free form, for the
// cached self-attention of a causal rollout (docs/rollout.md, pipeline/causal_rollout.h):
//
//  - Memory: the key/value cache rolls (a sink and a window of recent frames) and keeps, between
//    them, the most salient blocks of the frames it evicts (models/wan/causal_kv_cache.h), so
//    it stays at sink + window + persist frames' worth of rows however long the video is.
//  - Saliency: at each chunk's clean pass (the call that writes the keys later chunks read),
//    `samples` query rows spread over the chunk attend exactly to every cached key; each key
//    block gathers the attention mass they give it (summed over heads and layers), and the
//    scores decay at every new chunk. Evicted blocks compete with the persistent ones on that
//    score.
//  - Compute: every query block attends in full to the sink, the persistent blocks and its own
//    chunk, and to the `density` share of the window's earlier key blocks that score highest for
//    it (per head: mean-pooled query block . mean-pooled key block), on the block-sparse
//    executor. density 1 runs the dense kernel.
//
// What the paper trains (a compression of the persistent blocks and the sparsity itself) needs
// weights that are not public; this is the inference-side mechanism only, on any causal
// checkpoint. With room for every evicted block and density 1 it is the full-cache rollout bit
// for bit.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"  // BFloat16
#include "kernels/cpu/block_mask.h"

namespace vidax::sparse {

struct PbsaOptions {
  int64_t window_frames = 9;   // rolling window, latent frames (the chunk included)
  int64_t sink_frames = 3;     // first frames always kept
  int64_t persist_frames = 3;  // room for persistent blocks, in frames' worth of rows
  double density = 0.5;        // share of the window's earlier key blocks per query block
  int64_t block = 64;          // tokens per query / key block, >= 16 (a frame's last one ragged)
  int64_t samples = 16;        // query rows per chunk call for the saliency
  double decay = 0.5;          // score decay per new chunk
  std::string spec() const;    // canonical "pbsa:window=9,sink=3,..."
};

bool is_pbsa_spec(const std::string& spec);  // "pbsa" or "pbsa:..."
// Throws InputError naming the key and the range on a bad option.
PbsaOptions parse_pbsa_spec(const std::string& spec);

// Adds to mass[j] (j < keys) the attention probability query row i gives key j, for `samples`
// rows i spread evenly over [0, q_rows), summed over the heads. q: f32 [q_rows, heads, hd] rows
// q_stride apart; k: [keys, heads, hd] rows k_stride apart. Scores in f32, sums in double.
void sampled_key_mass(const float* q, int64_t q_stride, int64_t q_rows, const float* k,
                      int64_t k_stride, int64_t keys, int64_t heads, int64_t head_dim, float scale,
                      int64_t samples, double* mass);
void sampled_key_mass(const float* q, int64_t q_stride, int64_t q_rows, const BFloat16* k,
                      int64_t k_stride, int64_t keys, int64_t heads, int64_t head_dim, float scale,
                      int64_t samples, double* mass);

// A key block of the cache and whether every query block attends to it.
struct PbsaKeyBlock {
  int64_t begin = 0, rows = 0;
  bool always = false;  // sink, persistent or the chunk's own rows
};

// The mask of the chunk's query blocks (q_blocks over its rows) over `keys` (covering the cache's
// valid rows in order): `always` blocks FULL for every query block, and per (head, query block)
// the ceil(density x n) best of the n other blocks by mean(q block) . mean(k block).
template <typename K>
BlockMask pbsa_mask(const float* q, int64_t q_stride, const BlockPartition& q_blocks, const K* k,
                    int64_t k_stride, const std::vector<PbsaKeyBlock>& keys, int64_t heads,
                    int64_t head_dim, double density);

}  // namespace vidax::sparse
