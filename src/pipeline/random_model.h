// Writes a complete model folder (text-to-video, or image-to-video with its CLIP encoder) with
// small random weights in one of the three
// published layouts (official Wan repository, diffusers repository, ComfyUI models folder),
// exactly as the loaders expect real downloads: the official layout stores the T5 encoder and
// the VAE as PyTorch `.pth` zip checkpoints, diffusers uses its own names and config.json files,
// ComfyUI prefixes the DiT names and stores fp16/bf16. For end-to-end tests of `vidax generate`
// and for users who want to check a setup without downloading 20 GB. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "models/clip/clip_config.h"
#include "models/wan/dit_config.h"
#include "models/wan/t5_config.h"
#include "models/wan/vae_config.h"

namespace vidax {

struct RandomModelSpec {
  wan::DitConfig dit;
  wan::T5Config t5;
  wan::VaeConfig vae;
  uint64_t seed = 0;
  // Wan 2.2 A14B's form: two DiTs of the same config (a high-noise and a low-noise expert, with
  // different weights) in the layout's two-expert places (model_files.h).
  bool experts = false;
  // The CLIP image encoder of a DiT with an image branch (Wan 2.1 I2V / FLF2V), written in the
  // layout's place for it (model_files.h).
  std::optional<clip::ClipVisionConfig> clip;
};

// The model kinds random-model writes: "t2v" (Wan 2.1 T2V), "i2v" (Wan 2.1 I2V with a tiny
// CLIP; with experts, Wan 2.2 I2V A14B: no CLIP), "flf2v" (Wan 2.1 FLF2V with a tiny CLIP),
// "ti2v" (Wan 2.2 TI2V-5B: 48-channel Wan 2.2 VAE).
const std::vector<std::string>& random_model_kinds();

// A tiny model of `kind` (DiT dim 128, 2 layers; umT5 dim 64, 2 layers, vocab `vocab`; VAE base
// width 8 with 16 latent channels, or the Wan 2.2 VAE at widths 8/16 for ti2v; CLIP ViT of
// width 128, 2 heads, 3 layers at 56x56 with 14-pixel patches for i2v / flf2v) that runs a
// 64x64, 5-frame generation in seconds. InputError on an unknown kind or an impossible pair
// (two experts exist for t2v and i2v only).
RandomModelSpec tiny_random_model_spec(int64_t vocab, const std::string& kind = "t2v",
                                       bool experts = false);

// `layout`: "official" | "diffusers" | "comfyui". `spiece_model` is copied into the folder where
// the layout keeps its tokenizer (ComfyUI keeps none). Creates `dir` if needed. InputError on
// an unknown layout or I/O failure.
void write_random_model(const std::string& dir, const std::string& layout,
                        const RandomModelSpec& spec, const std::string& spiece_model);

// The same with real-size random weights for a DiT preset (wan/dit_config.h
// dit_preset_names(), e.g. wan2.1-t2v-14b), the real umT5-XXL and the real Wan 2.1 VAE, in the
// official layout with safetensors files (bf16 DiT and umT5, f32 VAE), written one tensor at a
// time (a 14B folder is 40 GB; memory stays at one tensor). For trying a large model's pipeline
// (`generate --weights-budget`) without a download. InputError on an unknown preset.
void write_full_size_random_model(const std::string& dir, const std::string& preset,
                                  const std::string& spiece_model, bool experts, uint64_t seed);

}  // namespace vidax
