#include "models/clip/clip_tensors.h"

namespace vidax::clip {

std::string clip_block_prefix(int64_t block) {
  return "visual.transformer." + std::to_string(block) + ".";
}

std::vector<TensorDecl> clip_vision_tensor_decls(const ClipVisionConfig& c, QkvStorage qkv) {
  std::vector<TensorDecl> d;
  auto vec = [&](const std::string& name, int64_t n) {
    d.push_back({name, Shape{n}, TensorRole::kVector});
  };
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    d.push_back({name + ".weight", Shape{out, in}, TensorRole::kMatrix});
    vec(name + ".bias", out);
  };
  d.push_back({"visual.patch_embedding.weight", Shape{c.dim, 3, c.patch_size, c.patch_size},
               TensorRole::kConvWeight});
  d.push_back({"visual.cls_embedding", Shape{1, 1, c.dim}, TensorRole::kVector});
  d.push_back({"visual.pos_embedding", Shape{1, c.tokens(), c.dim}, TensorRole::kVector});
  vec("visual.pre_norm.weight", c.dim);
  vec("visual.pre_norm.bias", c.dim);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = clip_block_prefix(i);
    vec(p + "norm1.weight", c.dim);
    vec(p + "norm1.bias", c.dim);
    if (qkv == QkvStorage::kFused) {
      linear(p + "attn.to_qkv", 3 * c.dim, c.dim);
    } else {
      linear(p + "attn.to_q", c.dim, c.dim);
      linear(p + "attn.to_k", c.dim, c.dim);
      linear(p + "attn.to_v", c.dim, c.dim);
    }
    linear(p + "attn.proj", c.dim, c.dim);
    vec(p + "norm2.weight", c.dim);
    vec(p + "norm2.bias", c.dim);
    linear(p + "mlp.0", c.ffn_dim, c.dim);
    linear(p + "mlp.2", c.dim, c.ffn_dim);
  }
  return d;
}

int64_t clip_vision_parameter_count(const ClipVisionConfig& c) {
  const int64_t block =
      4 * c.dim + (4 * c.dim * c.dim + 4 * c.dim) + (2 * c.dim * c.ffn_dim + c.ffn_dim + c.dim);
  return c.dim * 3 * c.patch_size * c.patch_size + c.dim + c.tokens() * c.dim + 2 * c.dim +
         (c.num_layers - 1) * block;
}

}  // namespace vidax::clip
