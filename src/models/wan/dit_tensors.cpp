#include "models/wan/dit_tensors.h"

namespace vidax::wan {

std::vector<TensorDecl> dit_tensor_decls(const DitConfig& c) {
  std::vector<TensorDecl> d;
  const int64_t dim = c.dim;
  constexpr ShardAxis kNone = ShardAxis::kNone, kOut = ShardAxis::kOutput;
  constexpr ShardAxis kIn = ShardAxis::kInput;
  // A row-parallel (kIn) linear keeps its bias whole; a column-parallel one splits it too.
  auto linear = [&](const std::string& name, int64_t out, int64_t in,
                    ShardAxis axis = ShardAxis::kNone) {
    d.push_back({name + ".weight", Shape{out, in}, TensorRole::kMatrix, axis});
    d.push_back({name + ".bias", Shape{out}, TensorRole::kVector, axis == kOut ? kOut : kNone});
  };
  auto vec = [&](const std::string& name, Shape s, ShardAxis axis = ShardAxis::kNone) {
    d.push_back({name, s, TensorRole::kVector, axis});
  };
  d.push_back({"patch_embedding.weight", Shape{dim, c.in_dim, c.patch[0], c.patch[1], c.patch[2]},
               TensorRole::kConvWeight, kNone});
  vec("patch_embedding.bias", Shape{dim});
  linear("text_embedding.0", dim, c.text_dim);
  linear("text_embedding.2", dim, dim);
  linear("time_embedding.0", dim, c.freq_dim);
  linear("time_embedding.2", dim, dim);
  linear("time_projection.1", 6 * dim, dim);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    for (const char* attn : {"self_attn.", "cross_attn."}) {
      for (const char* p : {"q", "k", "v"}) linear(b + attn + p, dim, dim, kOut);
      linear(b + attn + "o", dim, dim, kIn);
      if (c.qk_norm) {
        vec(b + attn + "norm_q.weight", Shape{dim}, kOut);
        vec(b + attn + "norm_k.weight", Shape{dim}, kOut);
      }
    }
    if (c.image_branch()) {
      linear(b + "cross_attn.k_img", dim, dim, kOut);
      linear(b + "cross_attn.v_img", dim, dim, kOut);
      if (c.qk_norm) vec(b + "cross_attn.norm_k_img.weight", Shape{dim}, kOut);
    }
    if (c.cross_attn_norm) {
      vec(b + "norm3.weight", Shape{dim});
      vec(b + "norm3.bias", Shape{dim});
    }
    linear(b + "ffn.0", c.ffn_dim, dim, kOut);
    linear(b + "ffn.2", dim, c.ffn_dim, kIn);
    vec(b + "modulation", Shape{1, 6, dim});
  }
  linear("head.head", c.out_dim * c.patch_volume(), dim);
  vec("head.modulation", Shape{1, 2, dim});
  if (c.image_branch()) {
    vec("img_emb.proj.0.weight", Shape{c.clip_dim});
    vec("img_emb.proj.0.bias", Shape{c.clip_dim});
    linear("img_emb.proj.1", c.clip_dim, c.clip_dim);
    linear("img_emb.proj.3", dim, c.clip_dim);
    vec("img_emb.proj.4.weight", Shape{dim});
    vec("img_emb.proj.4.bias", Shape{dim});
    if (c.flf_pos_tokens > 0) vec("img_emb.emb_pos", Shape{1, c.flf_pos_tokens, c.clip_dim});
  }
  return d;
}

int64_t dit_parameter_count(const DitConfig& config) {
  int64_t n = 0;
  for (const auto& t : dit_tensor_decls(config)) n += t.shape.numel();
  return n;
}

}  // namespace vidax::wan
