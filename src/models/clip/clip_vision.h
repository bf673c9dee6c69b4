// The CLIP ViT image encoder of Wan 2.1 I2V / FLF2V (`wan/modules/clip.py` CLIPModel.visual):
// the official preprocessing (each image bicubic-resized to image_size x image_size ignoring its
// aspect ratio, mapped from [-1, 1] back to [0, 1] without clamping, normalised with the OpenAI
// CLIP mean/std), then patch embedding (no bias), CLS token, position table, pre-norm, and all
// blocks but the last (`use_31_block=True`: the penultimate layer's 257 tokens, no post-norm,
// no head). Blocks are pre-norm: x += proj(attn(LN1(x))); x += fc2(act(fc1(LN2(x)))).
//
// Precision: LayerNorms, residual stream, softmax and attention accumulation are f32; kBF16 runs
// the GEMMs and attention inputs in bf16 (the official pipeline runs the encoder in fp16).
// Thread-safety: forward()/encode() are not reentrant on one encoder; OpenMP inside.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "models/clip/clip_config.h"
#include "models/clip/clip_tensors.h"
#include "models/wan/dit.h"  // Precision, WeightFn, CaptureFn

namespace vidax::clip {

// OpenAI CLIP normalisation (the official `_clip` transforms for non-SigLIP models).
inline constexpr float kClipMean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
inline constexpr float kClipStd[3] = {0.26862954f, 0.26130258f, 0.27577711f};

// images: each [3, H, W] F32 in [-1, 1] (any size) -> [B, 3, S, S] F32, S = image_size.
Tensor clip_preprocess(const std::vector<Tensor>& images, const ClipVisionConfig& config);

class ClipVisionEncoder {
 public:
  // Loads every block but the last (its output is never used); `qkv` says whether the
  // checkpoint fuses q|k|v (official) or stores them apart (transformers).
  ClipVisionEncoder(const ClipVisionConfig& config, const wan::WeightFn& weights, QkvStorage qkv,
                    wan::Precision precision);
  ~ClipVisionEncoder();
  ClipVisionEncoder(ClipVisionEncoder&&) noexcept;
  ClipVisionEncoder& operator=(ClipVisionEncoder&&) noexcept;

  const ClipVisionConfig& config() const;

  // pixels: [B, 3, S, S] F32 (clip_preprocess). Returns [B, tokens, dim] F32. capture receives
  // "embed" (after the position table and pre-norm) and "block<i>" for i < num_layers - 1, each
  // [B, tokens, dim]. InputError on a bad shape.
  Tensor forward(const Tensor& pixels, const wan::CaptureFn& capture = nullptr);

  // clip_preprocess + forward: the official `CLIPModel.visual(images)`; the pipeline's clip_fea.
  Tensor encode(const std::vector<Tensor>& images, const wan::CaptureFn& capture = nullptr);

  // Bytes the packed weights take in `precision`.
  static int64_t weight_bytes(const ClipVisionConfig& config, wan::Precision precision);
  // Upper estimate of the scratch one forward over `batch` images allocates.
  static int64_t activation_bytes(const ClipVisionConfig& config, int64_t batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vidax::clip
