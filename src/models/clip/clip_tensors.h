// The tensors of the CLIP vision tower by official name (`visual.*`, as stored in Wan's
// `models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth`). Checkpoints with separate q/k/v
// projections (transformers, diffusers' `image_encoder/`, ComfyUI's `clip_vision_h`) are
// declared with `attn.to_q/to_k/to_v` in place of the fused `attn.to_qkv`. The unused parts
// (the text tower, post_norm, the projection head) are not declared. Pure functions.
#pragma once

#include <vector>

#include "io/tensor_decl.h"
#include "models/clip/clip_config.h"

namespace vidax::clip {

enum class QkvStorage { kFused, kSeparate };

std::vector<TensorDecl> clip_vision_tensor_decls(const ClipVisionConfig& config,
                                                 QkvStorage qkv = QkvStorage::kFused);

// "visual.transformer.<i>."
std::string clip_block_prefix(int64_t block);

// Parameters of the blocks the features use (all but the last) and the embeddings.
int64_t clip_vision_parameter_count(const ClipVisionConfig& config);

}  // namespace vidax::clip
