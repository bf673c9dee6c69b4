#include "models/wan/t5_tensors.h"

#include <string>

namespace vidax::wan {

std::vector<TensorDecl> t5_tensor_decls(const T5Config& c) {
  std::vector<TensorDecl> d;
  auto matrix = [&](const std::string& name, int64_t out, int64_t in,
                    ShardAxis axis = ShardAxis::kNone) {
    d.push_back({name, Shape{out, in}, TensorRole::kMatrix, axis});
  };
  auto vector = [&](const std::string& name) {
    d.push_back({name, Shape{c.dim}, TensorRole::kVector, ShardAxis::kNone});
  };
  // The embedding is a lookup table, but declared as a matrix: it is as large as one.
  matrix("token_embedding.weight", c.vocab, c.dim);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    vector(b + "norm1.weight");
    for (const char* p : {"q", "k", "v"})
      matrix(b + "attn." + p + ".weight", c.dim_attn, c.dim, ShardAxis::kOutput);
    matrix(b + "attn.o.weight", c.dim, c.dim_attn, ShardAxis::kInput);
    vector(b + "norm2.weight");
    matrix(b + "ffn.gate.0.weight", c.dim_ffn, c.dim, ShardAxis::kOutput);
    matrix(b + "ffn.fc1.weight", c.dim_ffn, c.dim, ShardAxis::kOutput);
    matrix(b + "ffn.fc2.weight", c.dim, c.dim_ffn, ShardAxis::kInput);
    // A small table, but not a norm: kept apart from kVector so no [n] reshape is accepted.
    d.push_back({b + "pos_embedding.embedding.weight", Shape{c.num_buckets, c.num_heads},
                 TensorRole::kMatrix, ShardAxis::kNone});
  }
  vector("norm.weight");
  return d;
}

int64_t t5_parameter_count(const T5Config& config) {
  int64_t n = 0;
  for (const auto& t : t5_tensor_decls(config)) n += t.shape.numel();
  return n;
}

}  // namespace vidax::wan
