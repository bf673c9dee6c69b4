// The single declaration of every tensor the Wan DiT owns, by official name, shape and shard
// axis (io/tensor_decl.h). It drives loading, shape checks, missing/unexpected reports, random
// weights and memory accounting. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/shape.h"
#include "io/tensor_decl.h"
#include "models/wan/dit_config.h"

namespace vidax::wan {

using vidax::ShardAxis;
using vidax::TensorDecl;
using vidax::TensorRole;

// Tensor parallel over heads: q/k/v (self, cross, and the image k/v), their biases, the q/k
// RMSNorm weights and ffn.0 are split by output features (kOutput); the o projections and ffn.2
// by input features (kInput, biases replicated); everything else is replicated.

std::vector<TensorDecl> dit_tensor_decls(const DitConfig& config);
int64_t dit_parameter_count(const DitConfig& config);

}  // namespace vidax::wan
