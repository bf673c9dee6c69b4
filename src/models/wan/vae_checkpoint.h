// Opening a Wan VAE checkpoint as users download it, auto-detected:
//  - official names (`Wan2.1_VAE.pth` / `Wan2.2_VAE.pth` state dicts, or safetensors with the
//    same names; ComfyUI's `wan_2.1_vae.safetensors` / `wan2.2_vae.safetensors` use them too,
//    often in fp16/bf16), optionally under a `first_stage_model.` or `vae.` prefix;
//  - diffusers AutoencoderKLWan (`vae/diffusion_pytorch_model.safetensors` + `config.json`).
// The layouts are declarative rename rules onto the official names declared in
// vae_tensors.h; nothing is converted on disk. The config comes from an override, a
// config.json beside the weights, the file's `config` metadata (vidax / fixture files), or
// the tensor shapes, in that order. Thread-safe after open (read-only).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "models/wan/vae_config.h"

namespace vidax::wan {

enum class VaeLayout { kOfficial, kDiffusers, kPrefixed };
std::string vae_layout_name(VaeLayout layout);

// Official name -> diffusers AutoencoderKLWan name for a config (the conversion script's
// convert_vae / convert_vae_22 rules).
std::string vae_official_to_diffusers(const std::string& official, const VaeConfig& config);

class VaeCheckpoint {
 public:
  static VaeCheckpoint open(const std::string& path,
                            const std::optional<VaeConfig>& config_override = std::nullopt);

  const std::string& path() const { return path_; }
  VaeLayout layout() const { return layout_; }
  const VaeConfig& config() const { return config_; }
  const std::string& config_source() const { return config_source_; }
  const TensorSource& source() const { return source_; }

  const std::vector<std::string>& missing() const { return missing_; }        // official names
  const std::vector<std::string>& unexpected() const { return unexpected_; }  // file names
  // Throws InputError naming the first problems when the checkpoint cannot be loaded.
  void require_loadable() const;

  // The tensor for an official name, as stored (zero-copy).
  Tensor get(const std::string& official) const;
  std::function<Tensor(const std::string&)> loader() const {
    return [this](const std::string& n) { return get(n); };
  }

 private:
  std::string path_;
  VaeLayout layout_ = VaeLayout::kOfficial;
  VaeConfig config_;
  std::string config_source_;
  TensorSource source_;
  std::map<std::string, std::string> to_file_;
  std::vector<std::string> missing_, unexpected_, problems_;
};

}  // namespace vidax::wan
