#include "models/wan/vae_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vidax::wan {
namespace {

// Official statistics (WanVAE in wan/modules/vae.py, Wan2_2_VAE in wan/modules/vae2_2.py).
constexpr float kMean21[16] = {-0.7571, -0.7089, -0.9113, 0.1075,  -0.1745, 0.9653,
                               -0.1517, 1.5508,  0.4134,  -0.0715, 0.5517,  -0.3632,
                               -0.1922, -0.9497, 0.2503,  -0.2921};
constexpr float kStd21[16] = {2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                              3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160};
constexpr float kMean22[48] = {
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174,  0.1838,  0.1557,  -0.1382, 0.0542,
    0.2813,  0.0891,  0.1570,  -0.0098, 0.0375,  -0.1825, -0.2246, -0.1207, -0.0698, 0.5109,
    0.2665,  -0.2108, -0.2158, 0.2502,  -0.2055, -0.0322, 0.1109,  0.1567,  -0.0729, 0.0899,
    -0.2799, -0.1230, -0.0313, -0.1649, 0.0117,  0.0723,  -0.2839, -0.2083, -0.0520, 0.3748,
    0.0152,  0.1957,  0.1433,  -0.2944, 0.3573,  -0.0548, -0.1681, -0.0667};
constexpr float kStd22[48] = {
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901,
    0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944,
    0.5726, 1.2042, 0.5458, 1.6887, 0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744};

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_input_error(source, ": config key '", key, "' has the wrong type: ", j[key].dump());
  }
}

}  // namespace

int64_t VaeConfig::spatial_stride() const { return patch() * (int64_t{1} << (stages() - 1)); }

int64_t VaeConfig::temporal_stride() const {
  int64_t s = 1;
  for (bool b : temporal_downsample) s *= b ? 2 : 1;
  return s;
}

std::vector<float> VaeConfig::latent_inv_std() const {
  std::vector<float> inv(latent_std.size());
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / latent_std[i];
  return inv;
}

void VaeConfig::validate(const std::string& source) const {
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw_input_error(source, ": invalid Wan VAE config: ", what);
  };
  require(dim > 0 && dec_dim > 0 && z_dim > 0 && num_res_blocks > 0,
          "dim, dec_dim, z_dim and num_res_blocks must be positive");
  require(dim_mult.size() >= 2 && dim_mult.size() <= 6, "dim_mult must have 2..6 entries");
  for (int64_t m : dim_mult) require(m > 0 && m <= 64, "dim_mult entries must be in 1..64");
  require(dim <= 4096 && dec_dim <= 4096 && z_dim <= 1024 && num_res_blocks <= 16,
          "sizes exceed what any Wan VAE uses (dim 96/160, z_dim 16/48, 2 res blocks)");
  require(temporal_downsample.size() + 1 >= dim_mult.size(),
          "temperal_downsample needs one flag per downsampling stage (len(dim_mult) - 1)");
  require(latent_mean.size() == static_cast<size_t>(z_dim) &&
              latent_std.size() == static_cast<size_t>(z_dim),
          "latent mean/std must have z_dim entries");
  for (float s : latent_std) require(s > 0, "latent std entries must be positive");
  if (version == VaeVersion::kWan21) require(dec_dim == dim, "Wan 2.1 has dec_dim == dim");
  // Wan 2.1 halves the channels in each upsampler; odd widths cannot be halved.
  if (version == VaeVersion::kWan21)
    for (int64_t m : dim_mult) require((dec_dim * m) % 2 == 0, "decoder widths must be even");
}

std::string VaeConfig::to_json() const {
  std::vector<bool> td(temporal_downsample.begin(), temporal_downsample.end());
  nlohmann::json j = {{"version", version_name()}, {"dim", dim},
                      {"dec_dim", dec_dim},        {"z_dim", z_dim},
                      {"dim_mult", dim_mult},      {"num_res_blocks", num_res_blocks},
                      {"temperal_downsample", td}};
  return j.dump();
}

void set_official_latent_stats(VaeConfig& c) {
  const bool v22 = c.version == VaeVersion::kWan22;
  const float* mean = v22 ? kMean22 : kMean21;
  const float* stdv = v22 ? kStd22 : kStd21;
  const int64_t n = v22 ? 48 : 16;
  c.latent_mean.clear();
  c.latent_std.clear();
  if (c.z_dim > n) return;
  c.latent_mean.assign(mean, mean + c.z_dim);
  c.latent_std.assign(stdv, stdv + c.z_dim);
}

std::optional<VaeConfig> vae_preset(const std::string& name) {
  VaeConfig c;
  if (name == "wan2.1-vae") {
    c.version = VaeVersion::kWan21;
    c.dim = c.dec_dim = 96;
    c.z_dim = 16;
  } else if (name == "wan2.2-vae") {
    c.version = VaeVersion::kWan22;
    c.dim = 160;
    c.dec_dim = 256;
    c.z_dim = 48;
  } else {
    return std::nullopt;
  }
  set_official_latent_stats(c);
  return c;
}

std::vector<std::string> vae_preset_names() { return {"wan2.1-vae", "wan2.2-vae"}; }

VaeConfig vae_config_from_json(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(source, ": not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) throw_input_error(source, ": expected a JSON object");
  VaeConfig c;
  const bool diffusers = j.contains("base_dim") || j.contains("_class_name");
  if (diffusers) {
    c.version =
        get_or<bool>(j, "is_residual", false, source) ? VaeVersion::kWan22 : VaeVersion::kWan21;
    c.dim = get_or<int64_t>(j, "base_dim", 96, source);
    c.dec_dim = get_or<int64_t>(j, "decoder_base_dim", c.dim, source);
  } else {
    c.version = j.contains("dec_dim") ? VaeVersion::kWan22 : VaeVersion::kWan21;
    c.dim = get_or<int64_t>(j, "dim", 96, source);
    c.dec_dim = get_or<int64_t>(j, "dec_dim", c.dim, source);
  }
  c.z_dim = get_or<int64_t>(j, "z_dim", c.version == VaeVersion::kWan22 ? 48 : 16, source);
  c.dim_mult = get_or<std::vector<int64_t>>(j, "dim_mult", c.dim_mult, source);
  c.num_res_blocks = get_or<int64_t>(j, "num_res_blocks", 2, source);
  c.temporal_downsample =
      get_or<std::vector<bool>>(j, "temperal_downsample", c.temporal_downsample, source);
  const auto attn = get_or<std::vector<double>>(j, "attn_scales", {}, source);
  if (!attn.empty())
    throw_input_error(source, ": attn_scales ", j["attn_scales"].dump(),
                      " is not supported (every Wan VAE uses [])");
  set_official_latent_stats(c);
  if (j.contains("latents_mean") && j.contains("latents_std")) {
    c.latent_mean = get_or<std::vector<float>>(j, "latents_mean", {}, source);
    c.latent_std = get_or<std::vector<float>>(j, "latents_std", {}, source);
  }
  c.validate(source);
  return c;
}

VaeConfig infer_vae_config(const VaeShapeLookup& shape_of, const std::string& source) {
  // A convolution weight [out, in, kt, kh, kw] (or [out, in, kh, kw]) with positive extents: the
  // divisions below must never see a zero.
  auto need = [&](const std::string& name) {
    auto s = shape_of(name);
    if (!s)
      throw_input_error(source, ": cannot infer the Wan VAE config: tensor '", name,
                        "' is missing");
    if (s->rank() < 1 || (*s)[0] <= 0 || s->numel() <= 0)
      throw_input_error(source, ": tensor '", name, "' has shape ", s->str(),
                        ", expected a non-empty weight");
    return *s;
  };
  VaeConfig c;
  c.version = shape_of("encoder.downsamples.0.downsamples.0.residual.0.gamma") ? VaeVersion::kWan22
                                                                               : VaeVersion::kWan21;
  const bool v22 = c.version == VaeVersion::kWan22;
  c.dim = need("encoder.conv1.weight")[0];
  c.z_dim = need("conv2.weight")[0];
  // Encoder stages: residual blocks until the first resample, then one per stage.
  auto enc = [&](int64_t stage, int64_t j) {
    return v22 ? "encoder.downsamples." + std::to_string(stage) + ".downsamples." +
                     std::to_string(j) + "."
               : "encoder.downsamples." + std::to_string(j) + ".";
  };
  c.num_res_blocks = 0;
  // Bounded loops: a lookup is a finite tensor list, but never trust that for termination.
  while (c.num_res_blocks < 64 && shape_of(enc(0, c.num_res_blocks) + "residual.0.gamma"))
    ++c.num_res_blocks;
  if (c.num_res_blocks == 0) need(enc(0, 0) + "residual.0.gamma");
  c.dim_mult.clear();
  c.temporal_downsample.clear();
  for (int64_t s = 0; s < 16; ++s) {
    const int64_t base = v22 ? 0 : s * (c.num_res_blocks + 1);
    const auto conv = shape_of(enc(s, base) + "residual.2.weight");
    if (!conv) break;
    need(enc(s, base) + "residual.2.weight");  // rejects empty extents
    c.dim_mult.push_back((*conv)[0] / c.dim);
    const std::string rs = enc(s, base + c.num_res_blocks);
    if (!shape_of(rs + "resample.1.weight")) break;
    c.temporal_downsample.push_back(shape_of(rs + "time_conv.weight").has_value());
  }
  if (c.dim_mult.size() < 2)
    throw_input_error(source, ": cannot infer the Wan VAE config: found ", c.dim_mult.size(),
                      " encoder stage(s)");
  if (c.dim_mult.back() <= 0)
    throw_input_error(source,
                      ": cannot infer the Wan VAE config: the last encoder stage is "
                      "narrower than encoder.conv1");
  c.dec_dim = need("decoder.conv1.weight")[0] / c.dim_mult.back();
  set_official_latent_stats(c);
  c.validate(source + " (inferred from tensor shapes)");
  return c;
}

}  // namespace vidax::wan
