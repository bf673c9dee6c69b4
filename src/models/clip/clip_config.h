// Configuration of the CLIP vision tower Wan 2.1 image-to-video conditions on
// (`wan/modules/clip.py` VisionTransformer inside XLMRobertaCLIP, open-clip-xlm-roberta-large-
// vit-huge-14: ViT-H/14 at 224x224, width 1280, 16 heads, 32 pre-norm blocks with exact GELU).
// Built from a preset ("vit-h-14"), from a config JSON (the official constructor kwargs as the
// fixtures store them, or a transformers CLIPVisionConfig / CLIPConfig `config.json`), or
// inferred from tensor shapes. Plain value type; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/shape.h"

namespace vidax::clip {

enum class Activation { kGelu, kQuickGelu };

struct ClipVisionConfig {
  int64_t image_size = 224;
  int64_t patch_size = 14;
  int64_t dim = 1280;
  int64_t ffn_dim = 5120;  // dim x mlp_ratio
  int64_t num_heads = 16;
  int64_t num_layers = 32;
  Activation activation = Activation::kGelu;
  double eps = 1e-5;  // every LayerNorm

  int64_t grid() const { return image_size / patch_size; }
  int64_t tokens() const { return grid() * grid() + 1; }  // CLS + patches (257 for ViT-H/14)
  int64_t head_dim() const { return dim / num_heads; }
  // Throws InputError naming `source` if the combination is impossible.
  void validate(const std::string& source) const;
  std::string to_json() const;
};

// "vit-h-14" (Wan 2.1 I2V / FLF2V's image encoder). nullopt if unknown.
std::optional<ClipVisionConfig> clip_vision_preset(const std::string& name);

// Parses the official kwargs (`image_size`, `patch_size`, `dim` or `vision_dim`, `mlp_ratio` or
// `vision_mlp_ratio`, `num_heads` or `vision_heads`, `num_layers` or `vision_layers`,
// `activation`) or a transformers config (`hidden_size`, `intermediate_size`,
// `num_attention_heads`, `num_hidden_layers`, `image_size`, `patch_size`, `hidden_act`,
// `layer_norm_eps`; a CLIPConfig's `vision_config` object is used when present).
ClipVisionConfig clip_vision_config_from_json(const std::string& json_text,
                                              const std::string& source);

// Infers the config from tensor shapes given by official names (nullopt for absent tensors):
// width and patch from the patch embedding, image size from the position table, FFN width from
// the first MLP, layers by counting blocks. Heads cannot be read from shapes: 16 for widths 1024
// and 1280 (ViT-L/H), else width / 64.
using ClipShapeLookup = std::function<std::optional<Shape>(const std::string& official_name)>;
ClipVisionConfig infer_clip_vision_config(const ClipShapeLookup& shape_of,
                                          const std::string& source);

}  // namespace vidax::clip
