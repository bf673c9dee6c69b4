#include "dist/tensor_collectives.h"

#include <array>

#include "core/error.h"

namespace vidax::dist {

void broadcast_tensor(Group& group, Tensor& t, int root) {
  if (group.size() == 1) return;
  std::array<int64_t, 9> header{};  // rank, then the extents
  if (group.rank() == root) {
    VIDAX_CHECK(t.defined() && t.rank() <= 8, "broadcast_tensor: bad tensor on the root");
    t = t.dtype() == DType::kF32 ? t.contiguous() : t.to(DType::kF32);
    header[0] = t.rank();
    for (int i = 0; i < t.rank(); ++i) header[static_cast<size_t>(i + 1)] = t.dim(i);
  }
  group.broadcast(header.data(), 9, DType::kI64, root);
  if (group.rank() != root) {
    std::vector<int64_t> dims(header.begin() + 1, header.begin() + 1 + header[0]);
    t = Tensor::zeros(Shape(std::span<const int64_t>(dims)));
  }
  group.broadcast(t.raw_mutable_data(), t.numel(), DType::kF32, root);
}

uint64_t broadcast_u64(Group& group, uint64_t value, int root) {
  int64_t v = static_cast<int64_t>(value);
  group.broadcast(&v, 1, DType::kI64, root);
  return static_cast<uint64_t>(v);
}

}  // namespace vidax::dist
