// Runs an AttentionPlan on the DiT's self-attention inputs: dense head groups through the dense
// flash attention kernel on the strided q/k/v directly; sparse groups gather their heads into
// their layout's order (kernels/cpu/token_permute.h) and run the block-sparse executor
// (kernels/cpu/block_sparse_attention.h), which writes each output row straight back to its
// native position and head (BlockSparseOutput; no scatter pass). The output is the same
// [tokens, heads * head_dim] as the dense path's.
//
// Optional diagnostics for the evaluation harness: when a caller passes an
// AttentionDiagnostics, each call also computes dense attention and records the relative L2
// error of the planned output against it and the attention mass the plan keeps (recall,
// estimated exactly on a sample of query rows per head).
//
// Thread-safety: one workspace / diagnostics object per thread; the kernels parallelise inside.
#pragma once

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"  // BFloat16
#include "sparse/attention_policy.h"

namespace vidax::sparse {

// The self-attention call's tensors: q, k, v post-RoPE f32 [tokens, heads, head_dim] with row
// stride `stride` (views into the fused qkv buffer), out [tokens, heads * head_dim] with row
// stride out_stride. With bf16 the kernels read bf16-rounded inputs (like the dense bf16 path);
// q16/k16/v16, when given, are those bf16 copies with the same stride (dense and sparse groups
// read them in place; without them the runner converts what the dense groups need and the
// sparse groups convert while gathering). In f32 mode the sparse groups read q, k, v in place.
struct AttentionIo {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t stride = 0;
  const BFloat16* q16 = nullptr;
  const BFloat16* k16 = nullptr;
  const BFloat16* v16 = nullptr;
  int64_t tokens = 0, heads = 0, head_dim = 0;
  float scale = 0;
  bool bf16 = false;
  float* out = nullptr;
  int64_t out_stride = 0;
};

// One record per diagnosed call.
struct AttentionRecord {
  int64_t layer = 0, step = 0;
  int cfg_branch = 0;
  double density = 1;  // share of (query, key) pairs computed, over all heads
  double rel_l2 = 0;   // ||out - dense|| / ||dense|| over all heads and tokens
  double recall = 1;   // mean over sampled rows and heads of the softmax mass on kept keys
};

struct AttentionDiagnostics {
  int64_t sample_rows = 64;  // query rows per head for the recall estimate
  std::vector<AttentionRecord> records;
};

// Buffers reused from call to call (a denoising loop makes thousands of calls of one shape).
// Buffer: huge pages for the large gathered copies (core/aligned_memory.h).
struct AttentionWorkspace {
  Buffer<float> dense;
  Buffer<BFloat16> q16, k16, v16, qkv16;
};

// Throws InputError when the plan does not fit the call (a head missing or in two groups, a
// group's mask or layout of the wrong size, BOUNDARY tiles without a predicate).
void validate_plan(const AttentionPlan& plan, int64_t tokens, int64_t heads);

// Density of a plan over all heads (dense groups count 1).
double plan_density(const AttentionPlan& plan, int64_t heads);

// Runs `plan` on `io`. `call` labels the diagnostics record (layer, step, branch).
void execute_attention_plan(const AttentionPlan& plan, const AttentionIo& io,
                            AttentionWorkspace& ws, const AttentionCall& call,
                            AttentionDiagnostics* diagnostics = nullptr);

}  // namespace vidax::sparse
