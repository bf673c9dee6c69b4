// A linear layer that knows how it is split across the ranks of a tensor-parallel group:
//   kReplicated  every rank holds the whole [N, K] weight;
//   kColumn      rank t holds output features [t*N/T, (t+1)*N/T) (and their bias): its output
//                is a column slice, no communication (q/k/v, FFN in);
//   kRow         rank t holds input features [t*K/T, (t+1)*K/T): its output is a partial sum
//                that an all-reduce completes, bias added once (o, FFN out).
// The split is a property of the layer, so model code calls forward() the same way whatever the
// mesh. Without tensor parallelism (tp = 1, today) every split holds the whole weight.
// Thread-safety: as PackedLinear (immutable after construction; forward is re-entrant).
#pragma once

#include <utility>

#include "kernels/cpu/gemm.h"

namespace vidax {

enum class LinearSplit { kReplicated, kColumn, kRow };

class Linear : public PackedLinear {
 public:
  Linear() = default;
  Linear(PackedLinear packed, LinearSplit split) : PackedLinear(std::move(packed)), split_(split) {}
  LinearSplit split() const { return split_; }

 private:
  LinearSplit split_ = LinearSplit::kReplicated;
};

}  // namespace vidax
