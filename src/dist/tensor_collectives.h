// Collectives on whole tensors (shape travels with the data), for the pipeline's once-per-run
// exchanges: the text contexts a CFG leader encoded, a random seed drawn on rank 0.
// Thread-safety: as Group (the thread that issues collectives).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "dist/group.h"

namespace vidax::dist {

// Replaces `t` on every rank but `root` with root's F32 tensor (any shape up to 8 dims).
void broadcast_tensor(Group& group, Tensor& t, int root);

// Rank root's value on every rank.
uint64_t broadcast_u64(Group& group, uint64_t value, int root);

}  // namespace vidax::dist
