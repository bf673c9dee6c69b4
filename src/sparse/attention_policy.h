// Attention policies: what a sparse-attention method decides for one self-attention call of the
// DiT. A policy sees the call (layer, step, timestep, CFG branch, token grid, the post-RoPE
// queries and keys for estimators) and returns an AttentionPlan: the heads split into groups,
// each group with one TokenLayout (the heads of a group share a block shape, so the executor
// runs them in one call) and one BlockMask over that layout's blocks (mask head i = the
// group's i-th head), plus an optional element predicate for BOUNDARY tiles.
//
// Policies (dense, window, svg, spade, west, ...) live in src/sparse/, one file each; they know
// nothing about the executor, which only sees layouts and masks (kernels/cpu/block_mask.h).
// A policy object may keep state across calls (e.g. Sparse VideoGen's per-head routing); one
// object serves one generation on one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"  // BFloat16
#include "kernels/cpu/block_mask.h"
#include "sparse/token_layout.h"

namespace vidax::sparse {

// One self-attention call as a policy sees it.
struct AttentionCall {
  int64_t layer = 0, layers = 1;  // transformer block index / count
  int64_t step = 0, steps = 1;    // denoising step index / count (0, 1 outside a sampler)
  double timestep = 0;            // the sampler's timestep (0..1000)
  int cfg_branch = 0;             // 0: conditional, 1: unconditional
  TokenGrid grid;                 // latent tokens F x H x W (frame-major order)
  int64_t heads = 0, head_dim = 0;
  // Under Ulysses a rank sees heads [first_head, first_head + heads) of the model's
  // `model_heads` (0: heads); policies with per-head state index it by first_head + h.
  int64_t first_head = 0, model_heads = 0;
  // Post-RoPE queries and keys, f32, [tokens, heads, head_dim] with row stride `stride`
  // (elements). Read-only; valid for the duration of plan().
  const float* q = nullptr;
  const float* k = nullptr;
  int64_t stride = 0;
  // Optional bf16 copies of q and k, same layout and stride: the values the bf16 kernels see.
  // Estimators that scan every token may read these instead (half the bytes); null in fp32.
  const BFloat16* q16 = nullptr;
  const BFloat16* k16 = nullptr;
};

struct HeadGroup {
  std::vector<int64_t> heads;  // model head indices, each in exactly one group of a plan
  bool dense = false;          // run these heads with the dense kernel (layout/mask unused)
  TokenLayout layout;
  BlockMask mask;           // [heads.size()] x blocks x blocks, rows built
  TilePredicate predicate;  // required when the mask has BOUNDARY tiles
};

struct AttentionPlan {
  std::vector<HeadGroup> groups;
  bool all_dense() const;
};

class AttentionPolicy {
 public:
  virtual ~AttentionPolicy() = default;
  virtual std::string name() const = 0;  // canonical spec, e.g. "window:3,8,8"
  virtual AttentionPlan plan(const AttentionCall& call) = 0;
};

// Parses `--attention` specs: "dense", "window:kt,kh,kw[:tile=bt,bh,bw][:sink]" and the policies
// of policy_registry.cpp, with per-layer / per-step schedules ("dense@layers=0-1;window:..."; the
// grammar is in attention_spec.cpp and docs/sparse-attention.md). Throws InputError naming the
// bad part and what was expected.
std::unique_ptr<AttentionPolicy> make_attention_policy(const std::string& spec);

}  // namespace vidax::sparse
