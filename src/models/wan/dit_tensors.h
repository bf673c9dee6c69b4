// The single declaration of every tensor the Wan DiT owns, by official name and shape. It drives
// loading, shape checks, missing/unexpected reports and memory accounting. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/shape.h"
#include "models/wan/dit_config.h"

namespace vidax::wan {

enum class TensorRole { kMatrix, kVector, kConvWeight };

struct TensorDecl {
  std::string name;  // official Wan name, e.g. "blocks.3.self_attn.q.weight"
  Shape shape;
  TensorRole role;
};

std::vector<TensorDecl> dit_tensor_decls(const DitConfig& config);
int64_t dit_parameter_count(const DitConfig& config);

}  // namespace vidax::wan
