// umT5 self-attention pieces: the relative-position bucket of `wan/modules/t5.py`
// (`T5RelativeEmbedding._relative_position_bucket`, bidirectional, max_dist 128) and attention
// with an additive per-head bias and a key mask, without 1/sqrt(d) scaling (T5 folds it into the
// weights). flash_attention takes neither a bias nor a scattered key mask, hence this routine.
//
// Everything is f32 (also on the bf16 path: attention is ~2% of the encoder's FLOPs at 512
// tokens). Parallel over heads with OpenMP, no threads of its own; inside an enclosing parallel
// region it runs on the calling thread. Re-entrant; thread-safe for disjoint outputs.
#pragma once

#include <cstdint>

namespace vidax::wan {

// Bucket of relative position rel = key - query. The official code evaluates the large-distance
// formula in float32 and truncates it; it also takes log(0) on the diagonal and discards the
// result, which is undefined behaviour in C++ once converted to an integer, so this branches
// before the log.
int64_t t5_relative_bucket(int64_t rel, int64_t num_buckets, int64_t max_distance = 128);

struct T5AttentionDims {
  int64_t tokens;  // L: queries and keys (self-attention)
  int64_t heads;
  int64_t head_dim;
  // Elements between consecutive tokens; head h lives at offset h * head_dim within a row.
  int64_t q_stride, k_stride, v_stride, out_stride;
};

// out[i, h, :] = sum_j softmax_j(q[i,h].k[j,h] + bias[h, j - i + L - 1]) v[j, h, :] over keys j
// with key_valid[j] != 0 (key_valid may be null: every key). bias is [heads, 2L - 1] indexed by
// relative position. Masked keys get probability exactly 0, as the reference's float32-lowest
// fill gives. Throws InputError on non-positive sizes, short strides or when every key is masked.
void t5_attention(const float* q, const float* k, const float* v, float* out, const float* bias,
                  const uint8_t* key_valid, const T5AttentionDims& d);

// Scalar reference in double precision (for tests).
void t5_attention_reference(const float* q, const float* k, const float* v, float* out,
                            const float* bias, const uint8_t* key_valid, const T5AttentionDims& d);

}  // namespace vidax::wan
