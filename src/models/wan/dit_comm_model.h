// The communication model of the Wan DiT under a mesh: the bytes one rank sends per forward for
// each collective the sequence-parallel DiT issues (dit_block.cpp, dist/sequence_parallel.cpp),
// summed from its schedule (dit_schedule.h). `vidax bench dit --mesh` prints it beside the
// measured bytes. Thread-safe (pure).
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
  // all_reduce over tp: the o, cross-o and FFN-out partial sums and the q/k norm statistics,
  // every block (f32 whatever the precision).
  double tp_reduce = 0;
  // all_reduce over tp, once per new context (the cross-attention K/V are then cached): the
  // norm statistics of the context's (and CLIP features') keys.
  double tp_context = 0;
  double per_forward() const { return ulysses + ring + sp_gather + tp_reduce; }
};

// `tokens` = L of the forward; `latent_numel` = elements of the prediction [C, F, H, W];
// `context_tokens` = rows of the text context (<= text_len; 0: text_len).
// bf16 runs exchange q|k|v and the attention output as bf16 (2 bytes), fp32 runs as f32.
// An all-reduce of n bytes counts 2 n (T - 1) / T bytes sent (rounded down, as dist::Group
// counts it: the traffic of a ring all-reduce).
DitCommBytes dit_comm_bytes(const DitConfig& config, int64_t tokens, const dist::MeshSpec& mesh,
                            Precision precision, int64_t latent_numel, int64_t context_tokens = 0);

}  // namespace vidax::wan
