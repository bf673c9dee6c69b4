// Sequence parallelism for self-attention across the `sp` = ring x ulysses ranks of a mesh
// (dist/mesh.h). The token sequence of L rows is dealt to sp ranks in order, ceil(L / sp) rows
// each (`SeqShard`); the last rank(s) hold padding rows, which never reach attention as keys.
//
// Ulysses: each rank holds all heads of its rows; one all-to-all per call turns that into all
// rows of its ring shard for heads/U of the heads (q, k and v exchanged together, in the dtype
// the attention kernel reads: bf16 travels as 16-bit words), and one more turns the attention
// output back. Ring: the ring shards' keys/values travel around the ring; each step attends the
// local queries to one chunk and merges the chunk's (output, log-sum-exp) into the running
// result (kernels/cpu/attention_lse.h).
//
// Thread-safety: called by the thread that issues collectives; kernels use OpenMP inside.
#pragma once

#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"  // BFloat16
#include "dist/mesh.h"

namespace vidax {

// This rank's rows of an L-row sequence split over `sp_size` ranks.
struct SeqShard {
  int64_t total = 0;     // L (real rows)
  int64_t per_rank = 0;  // ceil(L / sp): rows every rank holds (padding included)
  int64_t first = 0;     // global index of this rank's first row
  int64_t real = 0;      // rows of this rank below L (the rest is padding)
  int sp_rank = 0, sp_size = 1;
};
SeqShard seq_shard(int64_t total, int sp_rank, int sp_size);

// The self-attention core on rows that are all present (one process, or after the Ulysses
// exchange): q, k, v [tokens, heads, head_dim] with row `stride`, out [tokens, heads*head_dim]
// with `out_stride`. `first_head` is the model index of head 0 here.
template <typename T>
using AttentionCore =
    std::function<void(const T* q, const T* k, const T* v, int64_t stride, int64_t tokens,
                       int64_t heads, int64_t first_head, float* out, int64_t out_stride)>;

// Buffers reused from call to call (the exchanges of every block have the same sizes).
struct SeqParallelWorkspace {
  Buffer<float> send32, recv32, heads_out, back;
  Buffer<BFloat16> send16, recv16;
  // Ring: this shard's K|V chunk and the one arriving ([rows][2 * width] each), one chunk's
  // output [rows, heads, hd], its and the running log-sum-exp [rows, heads].
  Buffer<float> kv32, next32, part, part_lse, lse;
  Buffer<BFloat16> kv16, next16;
  template <typename T>
  Buffer<T>& pick(Buffer<float>& f32, Buffer<BFloat16>& bf16) {
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return bf16;
    }
  }
};

// The Ulysses exchange alone: `rows` local rows of q | k | v (all heads, row `stride`) become
// out = [U * rows][3][heads / U][head_dim] (this rank's heads, the ring shard's rows in order);
// `send` is the packing buffer.
template <typename T>
void ulysses_to_heads(dist::Group& ulysses, const T* qkv, int64_t stride, int64_t rows,
                      int64_t heads, int64_t head_dim, Buffer<T>& send, Buffer<T>& out);

// Self-attention of the local rows under the mesh's ulysses x ring groups.
//   qkv    [shard.per_rank, 3 * heads * head_dim] rows q | k | v (row stride `stride`), RoPE done
//   out    [shard.per_rank, heads * head_dim] f32 (row stride `out_stride`); padding rows get 0
//   core   runs attention on complete rows (used without ring; ring uses its own chunk kernel)
template <typename T>
void sequence_parallel_attention(const dist::Mesh& mesh, const SeqShard& shard, const T* qkv,
                                 int64_t stride, int64_t heads, int64_t head_dim, float scale,
                                 const AttentionCore<T>& core, float* out, int64_t out_stride,
                                 SeqParallelWorkspace& ws);

}  // namespace vidax
