// Configuration of the Wan video VAE: Wan 2.1 (`wan/modules/vae.py`, 16 latent channels,
// stride 8 x 8 x 4) and Wan 2.2 (`wan/modules/vae2_2.py`, 48 channels, 2x2 patchify + stride
// 8, so 16 x 16 x 4, residual down/up blocks). Built from a preset, from the official
// constructor kwargs or a diffusers `config.json`, or inferred from tensor shapes. Holds the
// official per-channel latent statistics used to normalise latents. Plain value; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"

namespace vidax::wan {

enum class VaeVersion { kWan21, kWan22 };

struct VaeConfig {
  VaeVersion version = VaeVersion::kWan21;
  int64_t dim = 96;      // encoder base width
  int64_t dec_dim = 96;  // decoder base width (Wan 2.1: equal to dim)
  int64_t z_dim = 16;
  std::vector<int64_t> dim_mult = {1, 2, 4, 4};
  int64_t num_res_blocks = 2;
  // Per encoder stage (all but the last): halve time too. The decoder uses the reverse.
  std::vector<bool> temporal_downsample = {false, true, true};
  // Per-channel latent statistics (z_dim entries): encode returns (mu - mean) / std.
  std::vector<float> latent_mean, latent_std;

  int64_t patch() const { return version == VaeVersion::kWan22 ? 2 : 1; }
  int64_t io_channels() const { return 3 * patch() * patch(); }  // encoder in / decoder out
  int64_t spatial_stride() const;                                // 8 (2.1) or 16 (2.2)
  int64_t temporal_stride() const;                               // 4
  int64_t stages() const { return static_cast<int64_t>(dim_mult.size()); }
  // 1 / std rounded to f32, as the official wrapper computes it (decode divides by it).
  std::vector<float> latent_inv_std() const;
  std::string version_name() const { return version == VaeVersion::kWan22 ? "2.2" : "2.1"; }
  // Throws InputError naming `source` if the combination is impossible.
  void validate(const std::string& source) const;
  std::string to_json() const;
};

// "wan2.1-vae", "wan2.2-vae". nullopt if unknown.
std::optional<VaeConfig> vae_preset(const std::string& name);
std::vector<std::string> vae_preset_names();

// The official latent statistics of a version, truncated to the first `z_dim` channels when
// a (tiny test) model has fewer; empty when it has more.
void set_official_latent_stats(VaeConfig& config);

// Parses the official constructor kwargs ({"dim", "z_dim", "dim_mult", ...}, plus "dec_dim"
// for 2.2) or a diffusers AutoencoderKLWan config.json ({"base_dim", "latents_mean", ...,
// "is_residual"}). `source` names the file in errors.
VaeConfig vae_config_from_json(const std::string& json_text, const std::string& source);

// Infers version and dims from tensor shapes given by official names (nullopt if absent).
using VaeShapeLookup = std::function<std::optional<Shape>(const std::string& official_name)>;
VaeConfig infer_vae_config(const VaeShapeLookup& shape_of, const std::string& source);

}  // namespace vidax::wan
