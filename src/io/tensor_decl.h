// The declaration of a model's tensors, model-agnostic: every tensor a component owns by its
// official name, with the shape, dtype and role the loader checks and the axis a tensor-parallel
// run would split it along. A model family fills one list per component (dit_tensors.h, ...);
// the list drives loading (Checkpoint), shape checks, random weights, memory accounting and, once
// ranks load slices, sharding. Plain data and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/shape.h"

namespace vidax {

// What a tensor is; a loader accepts a kVector stored in any shape with the same element count.
enum class TensorRole { kMatrix, kVector, kConvWeight };

// How ranks of a tensor-parallel group hold a tensor:
//   kNone   replicated, every rank holds it whole;
//   kOutput column-parallel, split along dim 0 (the output features of an [out, in] linear
//           weight, and of its bias or of a per-feature vector);
//   kInput  row-parallel, split along dim 1 of an [out, in] weight (its bias stays whole: it is
//           added once, after the partial products are summed).
enum class ShardAxis { kNone, kOutput, kInput };

// Which stored dtypes a loader accepts for a tensor. Every Wan tensor is a float type today.
enum class DTypeRule { kAnyFloat };

struct TensorDecl {
  std::string name;  // official name, e.g. "blocks.3.self_attn.q.weight"
  Shape shape;
  TensorRole role = TensorRole::kMatrix;
  ShardAxis shard = ShardAxis::kNone;
  DTypeRule dtype = DTypeRule::kAnyFloat;
};

bool dtype_accepted(DTypeRule rule, DType dtype);

// The part of a declared tensor that rank `rank` of `size` holds: elements [begin, begin + length)
// along `dim`; dim -1 (kNone) means the whole tensor, begin and length then unused. Splits are
// even and contiguous, rank r taking the r-th part; InputError naming the tensor when the split
// dimension does not divide by `size`.
struct ShardSlice {
  int dim = -1;
  int64_t begin = 0, length = 0;
  Shape shape;  // the rank's shape
};
ShardSlice shard_slice(const TensorDecl& decl, int rank, int size);

std::string shard_axis_name(ShardAxis axis);  // "-", "out", "in"

}  // namespace vidax
