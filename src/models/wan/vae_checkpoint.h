// Opening a Wan VAE checkpoint as users download it, auto-detected:
//  - official names (`Wan2.1_VAE.pth` / `Wan2.2_VAE.pth` state dicts, or safetensors with the
//    same names; ComfyUI's `wan_2.1_vae.safetensors` / `wan2.2_vae.safetensors` use them too,
//    often in fp16/bf16), optionally under a `first_stage_model.` or `vae.` prefix;
//  - diffusers AutoencoderKLWan (`vae/diffusion_pytorch_model.safetensors` + `config.json`).
// The layouts are declarative rename rules onto the official names declared in
// vae_tensors.h, applied by the generic Checkpoint (io/checkpoint.h); nothing is converted on
// disk. The config comes from an override, a
// config.json beside the weights, the file's `config` metadata (vidax / fixture files), or
// the tensor shapes, in that order. Thread-safe after open (read-only).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"  // Tensor, TensorSource
#include "models/wan/vae_config.h"

namespace vidax::wan {

enum class VaeLayout { kOfficial, kDiffusers, kPrefixed };
std::string vae_layout_name(VaeLayout layout);

// Official name -> diffusers AutoencoderKLWan name for a config (the conversion script's
// convert_vae / convert_vae_22 rules).
std::string vae_official_to_diffusers(const std::string& official, const VaeConfig& config);

// The VAE's layouts in detection order (prefixed, diffusers, official); ids are VaeLayout values.
// The diffusers rename here guesses the version from the name (for config inference); the
// checked names use the config's.
const std::vector<CheckpointLayout>& vae_layouts();

// The generic Checkpoint with the VAE's layouts, declaration and config. get() reads tensors as
// stored (zero-copy; no fp8 scales).
class VaeCheckpoint : private Checkpoint {
 public:
  static VaeCheckpoint open(const std::string& path,
                            const std::optional<VaeConfig>& config_override = std::nullopt);

  VaeLayout layout() const { return static_cast<VaeLayout>(layout_id()); }
  const VaeConfig& config() const { return config_; }
  const std::string& config_source() const { return config_source_; }
  // Throws InputError naming the first problems when the checkpoint cannot be loaded.
  void require_loadable() const;

  using Checkpoint::get, Checkpoint::missing, Checkpoint::path, Checkpoint::source,
      Checkpoint::unexpected;
  // A weight function over get(); the VAE is small, so its pages are not dropped.
  std::function<Tensor(const std::string&)> loader() const {
    return [this](const std::string& n) { return get(n); };
  }

 private:
  VaeConfig config_;
  std::string config_source_;
};

}  // namespace vidax::wan
