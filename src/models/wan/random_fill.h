// Deterministic uniform random fill for synthetic weights (benchmarks and tests): counter-based
// (SplitMix64 of base + element index), so values do not depend on thread count or order.
// Thread-safe for distinct tensors; parallelises with OpenMP.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace vidax::wan {

// A seed for one named tensor of a model seeded with `seed`.
uint64_t random_tensor_key(uint64_t seed, const std::string& name);

// A new tensor of `shape` in float `dtype` with values offset + amplitude * U[-1, 1).
Tensor random_uniform_tensor(const Shape& shape, DType dtype, uint64_t key, float offset,
                             float amplitude);

}  // namespace vidax::wan
