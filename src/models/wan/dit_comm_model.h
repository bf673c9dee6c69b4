// The communication model of the Wan DiT under a mesh: the bytes one rank sends per forward for
// each collective the sequence-parallel DiT issues (dit_block.cpp, dist/sequence_parallel.cpp),
// derived from the shapes alone. `vidax bench dit --mesh` prints it beside the measured bytes,
// and the AoiZora planner issue will price meshes with it. Thread-safe (pure).
#pragma once

#include <cstdint>

#include "dist/mesh.h"
#include "models/wan/dit.h"

namespace vidax::wan {

struct DitCommBytes {
  double ulysses = 0;     // all_to_all: q|k|v to head shards and the output back, every block
  double ring = 0;        // send_recv: K|V chunks around the ring, every block
  double sp_gather = 0;   // all_gather: the head's output rows, once per forward
  double cfg_gather = 0;  // all_gather: one branch's prediction, once per guided step
  double per_forward() const { return ulysses + ring + sp_gather; }
};

// `tokens` = L of the forward; `latent_numel` = elements of the prediction [C, F, H, W].
// bf16 runs exchange q|k|v and the attention output as bf16 (2 bytes), fp32 runs as f32.
DitCommBytes dit_comm_bytes(const DitConfig& config, int64_t tokens, const dist::MeshSpec& mesh,
                            Precision precision, int64_t latent_numel);

}  // namespace vidax::wan
