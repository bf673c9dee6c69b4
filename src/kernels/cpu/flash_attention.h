// Fused multi-head attention for CPUs (flash attention): out = softmax(scale * q k^T) v per head,
// computed block by block with an online softmax (running row max and row sum, rescaled as new
// key blocks arrive), so the full [q_len, kv_len] score matrix is never materialised. Used for
// both self-attention (q, k, v views into one qkv projection) and cross-attention (text keys).
//
// Vectorized with Highway and dispatched at run time to the best SIMD target of the machine;
// the bf16 overload additionally uses AMX-BF16 tile products when the CPU and OS allow them.
// Accumulation and softmax statistics are always f32. See docs/kernels.md for the algorithm,
// tiling and precision notes.
//
// Thread-safety: the functions are re-entrant and may be called from several threads at once.
// Each call parallelises internally with OpenMP (`omp parallel for` over heads x query blocks;
// no threads of its own), so inside another parallel region it runs on the calling thread
// unless nested parallelism is enabled. Each calling thread keeps its packed K/V buffer (at
// most 128 MiB, or one head if that is larger) between calls to avoid re-faulting it in.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"  // BFloat16

namespace vidax {

struct AttentionDims {
  int64_t q_len;   // query tokens
  int64_t kv_len;  // key/value tokens present in memory
  // Keys/values at positions >= kv_valid are excluded (padding); 0 < kv_valid <= kv_len.
  int64_t kv_valid;
  int64_t heads;
  int64_t head_dim;  // any value >= 1 (Wan uses 128)
  // Elements between consecutive tokens (rows); head h lives at offset h*head_dim within a row.
  int64_t q_stride, k_stride, v_stride, out_stride;
  float scale;  // softmax scale, usually 1/sqrt(head_dim)
  // The last valid key (position kv_valid - 1) stands for this many identical keys (>= 1): its
  // softmax weight is multiplied by the count, exactly as if the key/value row were repeated.
  // Wan attends its text context zero-padded to 512 tokens, and every padding row has the same
  // key and value: one row with the count is the same attention over ~7x fewer keys. Values
  // above 1 need a non-zero scale. (The block-sparse executor has no such count.)
  int64_t kv_last_repeat = 1;
  // Optional [q_len, heads] output: each row's natural log-sum-exp of scale * q.k over the valid
  // keys (the repeat counted), so results over disjoint key chunks can be merged exactly (ring
  // attention, dist/sequence_parallel.h). Dense kernels only (not the block-sparse executor).
  float* lse = nullptr;
};

// q [q_len, heads, head_dim], k/v [kv_len, heads, head_dim] (row strides as in `d`),
// out [q_len, heads, head_dim] f32. `out` must not overlap the inputs. Throws InputError when
// the dimensions are inconsistent (non-positive sizes, kv_valid out of range, strides shorter
// than heads*head_dim).
void flash_attention(const float* q, const float* k, const float* v, float* out,
                     const AttentionDims& d);

// bf16 inputs, f32 accumulation and f32 softmax statistics. Picks the fastest bf16 kernel the
// machine offers (see AttentionBf16Kernel; kAuto).
void flash_attention(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
                     const AttentionDims& d);

// Throws InputError naming the offending field when `d` is inconsistent. Called by every entry
// point (and by attention_reference).
void validate_attention_dims(const AttentionDims& d);

// bf16 kernels. All accumulate in f32 and keep the softmax statistics in f32.
enum class AttentionBf16Kernel {
  kAuto,        // kAmx where usable, else kAvx512Bf16 where bf16_dot_product_fast, else kWidened
  kWidened,     // inputs widened to f32 while packing, f32 FMA; P stays f32. Every target.
  kAvx512Bf16,  // vdpbf16ps dot products (AVX512-BF16); P rounded to bf16 before P.V.
  kAmx,         // AMX-BF16 tile products (Sapphire Rapids+, Linux); P rounded to bf16.
};
// kAuto picks kAvx512Bf16 only where vdpbf16ps outruns f32 FMA (AMD Zen 4 and later,
// kernels/cpu/cpu_features.h): on Sapphire Rapids without AMX it issues at a quarter of the rate
// of vfmadd231ps, so kWidened is faster there.

// Whether `kernel` can run here (CPU features, OS permission for AMX tile state).
bool flash_attention_bf16_available(AttentionBf16Kernel kernel);

// Runs one specific bf16 kernel; throws InputError when it is not available here.
void flash_attention_bf16(AttentionBf16Kernel kernel, const BFloat16* q, const BFloat16* k,
                          const BFloat16* v, float* out, const AttentionDims& d);

// The kernel kAuto resolves to on this machine (never kAuto).
AttentionBf16Kernel auto_bf16_attention_kernel();

// Diagnostics: the Highway target the dispatcher picks on this machine ("AVX3", "AVX2", ...)
// and the kernel kAuto resolves to, e.g. "AVX3, bf16: amx".
std::string flash_attention_target();

}  // namespace vidax
