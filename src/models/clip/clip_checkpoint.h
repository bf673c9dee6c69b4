// Opening the CLIP image encoder of Wan 2.1 I2V / FLF2V as users download it, auto-detected:
//  - official: `models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth` (the whole
//    XLMRobertaCLIP: `visual.*` is read, `textual.*` and `log_scale` are ignored);
//  - transformers names (`vision_model.embeddings.patch_embedding.weight`, separate
//    q_proj/k_proj/v_proj): diffusers' `image_encoder/` (with its config.json) and ComfyUI's
//    `clip_vision_h.safetensors`, optionally under a common prefix.
// Declarative renames onto the official names of clip_tensors.h through the generic Checkpoint.
// Thread-safe after open (read-only).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "models/clip/clip_config.h"
#include "models/clip/clip_tensors.h"

namespace vidax::clip {

enum class ClipLayout { kOfficial, kTransformers };
std::string clip_layout_name(ClipLayout layout);
const std::vector<CheckpointLayout>& clip_layouts();

// Official name -> transformers name (without a file prefix); the name itself when no rule
// applies.
std::string clip_official_to_transformers(const std::string& official);

class ClipCheckpoint : private Checkpoint {
 public:
  static ClipCheckpoint open(const std::string& path,
                             const std::optional<ClipVisionConfig>& config_override = std::nullopt);

  ClipLayout layout() const { return static_cast<ClipLayout>(layout_id()); }
  QkvStorage qkv() const {
    return layout() == ClipLayout::kOfficial ? QkvStorage::kFused : QkvStorage::kSeparate;
  }
  const ClipVisionConfig& config() const { return config_; }
  const std::string& config_source() const { return config_source_; }
  void require_loadable() const;

  using Checkpoint::file_name, Checkpoint::get, Checkpoint::loader, Checkpoint::missing,
      Checkpoint::path, Checkpoint::shape_mismatches, Checkpoint::source, Checkpoint::unexpected,
      Checkpoint::unsupported_dtype;

 private:
  ClipVisionConfig config_;
  std::string config_source_;
};

// Whether `path` (a file, index or folder) holds a CLIP vision tower in a known layout, judged
// from tensor names alone (for model folder detection and `inspect`).
bool looks_like_clip_vision(const CheckpointNames& names);

}  // namespace vidax::clip
