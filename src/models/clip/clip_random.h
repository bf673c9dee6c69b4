// Deterministic random weights for a CLIP vision config (official `visual.*` names, fused
// q/k/v), for tiny image-to-video models (`vidax random-model --model i2v`) and tests: patch
// embedding and projections uniform with the variance of N(0, 1/fan_in), biases U(+-0.05 sqrt 3),
// LayerNorm weights 1 + U(+-0.17), class and position embeddings with std 1/sqrt(dim)
// (activations stay O(1)). Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "models/clip/clip_config.h"
#include "models/wan/dit.h"  // WeightFn

namespace vidax::clip {

// A WeightFn generating each tensor of clip_vision_tensor_decls(config, kFused) on request in
// `dtype` (F32, BF16 or F16).
wan::WeightFn random_clip_weights(const ClipVisionConfig& config, DType dtype, uint64_t seed);

// The same weights with the fused `attn.to_qkv` split into `attn.to_q`, `to_k`, `to_v` (rows
// [0, dim), [dim, 2 dim), [2 dim, 3 dim)), the declaration of QkvStorage::kSeparate: what a
// transformers-layout file of the same model holds.
wan::WeightFn split_qkv_weights(const ClipVisionConfig& config, const wan::WeightFn& fused);

}  // namespace vidax::clip
