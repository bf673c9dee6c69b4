// The single declaration of every tensor the umT5 encoder owns, by official name
// (`wan/modules/t5.py` state_dict) and shape. It drives loading, shape checks, missing/unexpected
// reports, random weights and memory accounting. Tensor parallel over heads: q/k/v and the FFN's
// gate and fc1 split by output features (kOutput), o and fc2 by input features (kInput); norms,
// embeddings and position tables are replicated. Thread-safe.
#pragma once

#include <vector>

#include "models/wan/dit_tensors.h"  // TensorDecl, TensorRole, ShardAxis
#include "models/wan/t5_config.h"

namespace vidax::wan {

// token_embedding.weight [vocab, dim]; per block i: blocks.i.norm1.weight [dim],
// blocks.i.attn.{q,k,v}.weight [dim_attn, dim], blocks.i.attn.o.weight [dim, dim_attn],
// blocks.i.norm2.weight [dim], blocks.i.ffn.gate.0.weight / ffn.fc1.weight [dim_ffn, dim],
// blocks.i.ffn.fc2.weight [dim, dim_ffn], blocks.i.pos_embedding.embedding.weight
// [num_buckets, num_heads]; norm.weight [dim]. No biases anywhere.
std::vector<TensorDecl> t5_tensor_decls(const T5Config& config);
int64_t t5_parameter_count(const T5Config& config);

}  // namespace vidax::wan
