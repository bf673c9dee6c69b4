#include "io/tensor_decl.h"

#include "core/error.h"

namespace vidax {

bool dtype_accepted(DTypeRule rule, DType dtype) {
  switch (rule) {
    case DTypeRule::kAnyFloat:
      return is_float(dtype);
  }
  return false;
}

ShardSlice shard_slice(const TensorDecl& decl, int rank, int size) {
  VIDAX_CHECK(size >= 1 && rank >= 0 && rank < size, "shard_slice: rank ", rank, " of ", size);
  ShardSlice s;
  s.shape = decl.shape;
  if (decl.shard == ShardAxis::kNone) return s;
  const int dim = decl.shard == ShardAxis::kOutput ? 0 : 1;
  if (decl.shape.rank() <= dim)
    throw_input_error(decl.name, ": shape ", decl.shape.str(), " has no dim ", dim, " to split");
  const int64_t n = decl.shape[dim];
  if (n % size != 0)
    throw_input_error(decl.name, ": dim ", dim, " of shape ", decl.shape.str(),
                      " does not split evenly over ", size, " ranks");
  s.dim = dim;
  s.length = n / size;
  s.begin = s.length * rank;
  s.shape[dim] = s.length;
  return s;
}

std::string shard_axis_name(ShardAxis axis) {
  switch (axis) {
    case ShardAxis::kNone:
      return "-";
    case ShardAxis::kOutput:
      return "out";
    case ShardAxis::kInput:
      return "in";
  }
  return "?";
}

}  // namespace vidax
