// The per-rank schedule of the Wan DiT under a mesh (dist/schedule.h): every op one forward (and
// one denoising step) runs on a rank, with its FLOPs or bytes, and every collective with its mesh
// axis and size, in the order dit.cpp / dit_block.cpp / dist/sequence_parallel.cpp issue them.
// The linears' per-rank shapes come from the tensor declaration that loads and splits the
// weights (dit_tensors.h: shard axis kOutput = column split, kInput = row split followed by a tp
// all-reduce), so the schedule follows the declaration the runtime executes; test_dist checks
// its collective calls and bytes against what the process groups counted in real forwards on
// every mesh (tests/dist/dit_schedule_test.cpp). Used by `vidax bench dit --mesh` (the
// communication model) and the topology planner. Pure; thread-safe.
#pragma once

#include <cstdint>

#include "dist/mesh.h"
#include "dist/schedule.h"
#include "models/wan/dit.h"

namespace vidax::wan {

struct DitScheduleRequest {
  int64_t tokens = 0;          // L, the patch tokens of one forward
  int64_t context_tokens = 0;  // rows of the text context (<= text_len; 0: text_len)
  int64_t latent_numel = 0;    // elements of the prediction [C, F, H, W] (the CFG exchange)
  Precision precision = Precision::kBF16;
  bool guided = true;  // classifier-free guidance: two predictions per step
  // The self-attention's share of the dense FLOPs (a sparse policy's density; 1: dense). A bf16
  // run with a sparse policy under Ulysses also exchanges the f32 q|k|v its estimators read.
  double attention_density = 1.0;
  bool sparse_policy = false;
  // --weights sharded: every block is all-gathered over the sp group from each rank's share,
  // beside the compute of the block before it. `checkpoint_item_bytes`: bytes per stored weight.
  bool sharded_weights = false;
  double checkpoint_item_bytes = 2;
};

// One forward. `new_context`: the text context is new to the model, so the cross-attention
// keys/values are computed (and their norm statistics reduced under tp) before being cached.
dist::Schedule dit_forward_schedule(const DitConfig& config, const DitScheduleRequest& request,
                                    const dist::MeshSpec& mesh, bool new_context = false);

// One denoising step: the forwards a rank runs (two when guided without cfg parallelism, else
// one), then the exchange of the branches' predictions under cfg = 2. Contexts are cached.
dist::Schedule dit_step_schedule(const DitConfig& config, const DitScheduleRequest& request,
                                 const dist::MeshSpec& mesh);

// Bytes of one block's weights in the checkpoint (all tensors of `blocks.0.`), as one rank of tp
// degree `tp` holds them (its slice of each split tensor) and --weights sharded gathers them
// (before its per-rank alignment).
double dit_block_checkpoint_bytes(const DitConfig& config, double item_bytes, int tp = 1);

}  // namespace vidax::wan
