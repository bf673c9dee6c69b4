// Configuration of the Wan diffusion transformer (Wan 2.1 t2v / i2v, Wan 2.2 ti2v forward).
// Built from a preset name, from a checkpoint's config.json (official or diffusers keys), or
// inferred from the tensor shapes of a checkpoint. Plain value type; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"

namespace vidax::wan {

enum class DitKind { kT2V, kI2V, kTI2V };

struct DitConfig {
  DitKind kind = DitKind::kT2V;
  std::array<int64_t, 3> patch = {1, 2, 2};
  int64_t text_len = 512;
  int64_t in_dim = 16;
  int64_t dim = 1536;
  int64_t ffn_dim = 8960;
  int64_t freq_dim = 256;
  int64_t text_dim = 4096;
  int64_t out_dim = 16;
  int64_t num_heads = 12;
  int64_t num_layers = 30;
  bool qk_norm = true;
  bool cross_attn_norm = true;
  double eps = 1e-6;
  // i2v: CLIP feature width of the image branch of cross-attention (ViT-H/14: 1280 x 257
  // tokens), Wan 2.1 I2V / FLF2V. 0: an i2v model without that branch (Wan 2.2 I2V A14B: the
  // image enters only through the concatenated latent `y`).
  int64_t clip_dim = 1280;
  // FLF2V (first-last-frame): the image branch adds a learnt position table `img_emb.emb_pos`
  // [1, flf_pos_tokens, clip_dim] to the CLIP tokens of both images (2 x 257); 0 otherwise.
  int64_t flf_pos_tokens = 0;
  // Trained for causal (autoregressive) rollout: Self-Forcing / CausVid (docs/rollout.md). Set by
  // a checkpoint in Self-Forcing's layout or a config with "causal": true (vidax's random causal
  // models); the weights have the same names and shapes as a bidirectional Wan DiT.
  bool causal = false;

  int64_t head_dim() const { return dim / num_heads; }
  // Cross-attention has the CLIP image branch (img_emb, k_img / v_img / norm_k_img).
  bool image_branch() const { return kind == DitKind::kI2V && clip_dim > 0; }
  int64_t patch_volume() const { return patch[0] * patch[1] * patch[2]; }
  // Throws InputError naming `source` if the combination is impossible.
  void validate(const std::string& source) const;
  std::string to_json() const;
  std::string kind_name() const;
};

// "wan2.1-t2v-1.3b", "wan2.1-t2v-14b", "wan2.1-i2v-14b", "wan2.2-ti2v-5b". nullopt if unknown.
std::optional<DitConfig> dit_preset(const std::string& name);
std::vector<std::string> dit_preset_names();

// Parses an official (`dim`, `num_heads`, ...) or diffusers (`num_attention_heads`,
// `attention_head_dim`, ...) config.json text. `source` names the file in errors.
DitConfig dit_config_from_json(const std::string& json_text, const std::string& source);

// Infers the config from tensor shapes given by official names (nullopt for absent tensors).
using ShapeLookup = std::function<std::optional<Shape>(const std::string& official_name)>;
DitConfig infer_dit_config(const ShapeLookup& shape_of, const std::string& source);

}  // namespace vidax::wan
