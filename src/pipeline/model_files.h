// Finding the four files of a text-to-video model (DiT, T5 text encoder, VAE, tokenizer) in a
// folder as users download it: the official Wan repository (Wan-AI/Wan2.1-T2V-1.3B: DiT
// safetensors + config.json at the top, `models_t5_umt5-xxl-enc-bf16.pth`, `Wan2.1_VAE.pth`,
// `google/umt5-xxl/spiece.model`), the diffusers repository (`transformer/`, `text_encoder/`,
// `vae/`, `tokenizer/`), or a ComfyUI models folder (`diffusion_models/`, `text_encoders/`,
// `vae/`; ComfyUI ships no sentencepiece model, so the tokenizer must be given explicitly), or
// Self-Forcing's folder (`wan_models/Wan2.1-T2V-1.3B/` for the base model and
// `checkpoints/self_forcing_dmd.pt` for the causal DiT that replaces its DiT).
// Explicit paths override what the folder provides. Pure function of the file system.
#pragma once

#include <string>

namespace vidax {

struct ModelFiles {
  std::string dit, t5, vae, tokenizer;  // files or folders, each accepted by its loader
  std::string layout;  // "official", "diffusers", "comfyui", "self-forcing" or "explicit"
  // Wan 2.2 A14B: the low-noise expert (`dit` is then the high-noise one); empty for one DiT.
  // Official folders: high_noise_model/ and low_noise_model/; diffusers: transformer/ (high)
  // and transformer_2/ (low); ComfyUI: the two diffusion models named *high_noise* and
  // *low_noise*; explicitly --dit and --dit-low.
  std::string dit_low;
  double boundary_ratio = 0;  // from a diffusers model_index.json; 0: the family's default
  // Wan 2.1 I2V / FLF2V: the CLIP image encoder (official
  // `models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth`, diffusers `image_encoder/`,
  // ComfyUI `clip_vision/*.safetensors`); empty when the folder has none. Never required here:
  // the plan requires it when the DiT has an image branch.
  std::string clip;
};

// `model_dir` may be empty (then all four explicit paths are required). Throws InputError
// naming the folder, what layout was recognised and which file is missing or ambiguous.
// With `require_all` false, components that are not found stay empty (for `inspect`).
ModelFiles resolve_model_files(const std::string& model_dir, const ModelFiles& explicit_paths,
                               bool require_all = true);

// Whether `dir` is a model folder holding two DiT experts (Wan 2.2 A14B) in any layout.
bool has_two_experts(const std::string& dir);

}  // namespace vidax
