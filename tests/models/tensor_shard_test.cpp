// The shard axes of the Wan declarations: what a tensor-parallel loader would split.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "models/wan/dit_tensors.h"
#include "models/wan/t5_tensors.h"
#include "models/wan/vae_tensors.h"

namespace vidax::wan {
namespace {

template <class Decls>
std::map<std::string, ShardAxis> axes(const Decls& decls) {
  std::map<std::string, ShardAxis> m;
  for (const auto& d : decls) m[d.name] = d.shard;
  return m;
}

TEST(TensorShard, DitHeadsParallel) {
  DitConfig c = *dit_preset("wan2.1-t2v-1.3b");
  c.kind = DitKind::kI2V;
  c.num_layers = 1;
  const auto a = axes(dit_tensor_decls(c));
  for (const char* n :
       {"self_attn.q.weight", "self_attn.q.bias", "self_attn.k.weight", "self_attn.v.bias",
        "cross_attn.q.weight", "cross_attn.k_img.weight", "cross_attn.v_img.bias",
        "self_attn.norm_q.weight", "cross_attn.norm_k.weight", "cross_attn.norm_k_img.weight",
        "ffn.0.weight", "ffn.0.bias"})
    EXPECT_EQ(a.at(std::string("blocks.0.") + n), ShardAxis::kOutput) << n;
  for (const char* n : {"self_attn.o.weight", "cross_attn.o.weight", "ffn.2.weight"})
    EXPECT_EQ(a.at(std::string("blocks.0.") + n), ShardAxis::kInput) << n;
  for (const char* n : {"blocks.0.self_attn.o.bias", "blocks.0.ffn.2.bias", "blocks.0.modulation",
                        "patch_embedding.weight", "head.head.weight", "text_embedding.0.weight",
                        "img_emb.proj.1.weight", "blocks.0.norm3.weight"})
    EXPECT_EQ(a.at(n), ShardAxis::kNone) << n;
  // Every split of the 1.3B model divides evenly over 4 ranks (not over its 12 heads: ffn_dim
  // 8960 is not a multiple of 12).
  for (const auto& d : dit_tensor_decls(c))
    if (d.shard != ShardAxis::kNone) {
      EXPECT_NO_THROW(shard_slice(d, 3, 4)) << d.name;
    }
}

TEST(TensorShard, T5HeadsParallel) {
  T5Config c;
  c.num_layers = 1;
  const auto a = axes(t5_tensor_decls(c));
  for (const char* n :
       {"attn.q.weight", "attn.k.weight", "attn.v.weight", "ffn.gate.0.weight", "ffn.fc1.weight"})
    EXPECT_EQ(a.at(std::string("blocks.0.") + n), ShardAxis::kOutput) << n;
  for (const char* n : {"attn.o.weight", "ffn.fc2.weight"})
    EXPECT_EQ(a.at(std::string("blocks.0.") + n), ShardAxis::kInput) << n;
  for (const char* n : {"token_embedding.weight", "norm.weight", "blocks.0.norm1.weight",
                        "blocks.0.pos_embedding.embedding.weight"})
    EXPECT_EQ(a.at(n), ShardAxis::kNone) << n;
}

TEST(TensorShard, VaeReplicated) {
  for (const auto& d : vae_tensor_decls(*vae_preset("wan2.1-vae")))
    EXPECT_EQ(d.shard, ShardAxis::kNone) << d.name;
}

}  // namespace
}  // namespace vidax::wan
