#include "models/clip/clip_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config_json.h"

namespace vidax::clip {

void ClipVisionConfig::validate(const std::string& source) const {
  auto require = [&](bool ok, const char* what) {
    if (!ok) throw_input_error(source, ": invalid CLIP vision config ", to_json(), ": ", what);
  };
  require(image_size > 0 && patch_size > 0 && dim > 0 && ffn_dim > 0 && num_layers > 0,
          "sizes must be positive");
  require(image_size % patch_size == 0, "image_size must be a multiple of patch_size");
  require(num_heads > 0 && dim % num_heads == 0, "dim must be a positive multiple of num_heads");
  // The official forward returns the output of all blocks but the last (use_31_block).
  require(num_layers >= 2, "num_layers must be at least 2 (the features skip the last block)");
  require(eps > 0 && eps < 1, "layer_norm_eps must be in (0, 1)");
  require(image_size <= 4096 && patch_size <= 256 && dim <= 65536 && ffn_dim <= 262144 &&
              num_heads <= 1024 && num_layers <= 256 && tokens() <= 65536,
          "sizes exceed what any CLIP vision tower uses");
}

std::string ClipVisionConfig::to_json() const {
  nlohmann::json j = {{"image_size", image_size},
                      {"patch_size", patch_size},
                      {"dim", dim},
                      {"ffn_dim", ffn_dim},
                      {"num_heads", num_heads},
                      {"num_layers", num_layers},
                      {"activation", activation == Activation::kGelu ? "gelu" : "quick_gelu"},
                      {"eps", eps}};
  return j.dump();
}

std::optional<ClipVisionConfig> clip_vision_preset(const std::string& name) {
  if (name == "vit-h-14") return ClipVisionConfig{};
  return std::nullopt;
}

namespace {

Activation parse_activation(const nlohmann::json& j, const char* key, const std::string& source) {
  if (!j.contains(key)) return Activation::kGelu;
  const auto& v = j[key];
  if (v == "gelu") return Activation::kGelu;
  if (v == "quick_gelu") return Activation::kQuickGelu;
  throw_input_error(source, ": config key '", key, "' is ", v.dump(),
                    "; supported: \"gelu\" (exact), \"quick_gelu\"");
}

}  // namespace

ClipVisionConfig clip_vision_config_from_json(const std::string& json_text,
                                              const std::string& source) {
  nlohmann::json j = parse_config_object(json_text, source);
  if (j.contains("vision_config") && j["vision_config"].is_object()) j = j["vision_config"];
  ClipVisionConfig c;
  if (j.contains("hidden_size")) {  // transformers CLIPVisionConfig
    c.dim = config_int(j, {"hidden_size"}, c.dim, source);
    c.ffn_dim = config_int(j, {"intermediate_size"}, c.ffn_dim, source);
    c.num_heads = config_int(j, {"num_attention_heads"}, c.num_heads, source);
    c.num_layers = config_int(j, {"num_hidden_layers"}, c.num_layers, source);
    c.image_size = config_int(j, {"image_size"}, c.image_size, source);
    c.patch_size = config_int(j, {"patch_size"}, c.patch_size, source);
    c.eps = config_number(j, {"layer_norm_eps"}, c.eps, source);
    c.activation = parse_activation(j, "hidden_act", source);
    if (config_int(j, {"num_channels"}, 3, source) != 3)
      throw_input_error(source, ": num_channels must be 3 (RGB)");
  } else {
    c.image_size = config_int(j, {"image_size"}, c.image_size, source);
    c.patch_size = config_int(j, {"patch_size"}, c.patch_size, source);
    c.dim = config_int(j, {"dim", "vision_dim"}, c.dim, source);
    const double ratio = config_number(j, {"mlp_ratio", "vision_mlp_ratio"}, 4.0, source);
    if (!(ratio > 0 && ratio < 1024)) throw_input_error(source, ": mlp_ratio must be positive");
    c.ffn_dim = config_int(j, {"ffn_dim"}, static_cast<int64_t>(static_cast<double>(c.dim) * ratio),
                           source);  // int(dim * mlp_ratio), as the official constructor
    c.num_heads = config_int(j, {"num_heads", "vision_heads"}, c.num_heads, source);
    c.num_layers = config_int(j, {"num_layers", "vision_layers"}, c.num_layers, source);
    c.eps = config_number(j, {"eps", "norm_eps"}, c.eps, source);
    c.activation = parse_activation(j, "activation", source);
    if (j.contains("pool_type") && j["pool_type"] != "token")
      throw_input_error(source, ": pool_type ", j["pool_type"].dump(),
                        " is not supported (the Wan CLIP uses \"token\")");
    if (j.contains("pre_norm") && j["pre_norm"] != true)
      throw_input_error(source, ": pre_norm=false is not supported (the Wan CLIP has one)");
    if (j.contains("post_norm") && j["post_norm"] != false)
      throw_input_error(source, ": post_norm=true blocks are not supported");
  }
  c.validate(source);
  return c;
}

ClipVisionConfig infer_clip_vision_config(const ClipShapeLookup& shape_of,
                                          const std::string& source) {
  auto need = [&](const std::string& name) {
    auto s = shape_of(name);
    if (!s)
      throw_input_error(source, ": cannot infer the CLIP vision config: tensor '", name,
                        "' is missing");
    return *s;
  };
  ClipVisionConfig c;
  const Shape patch = need("visual.patch_embedding.weight");
  if (patch.rank() != 4 || patch[1] != 3 || patch[2] != patch[3])
    throw_input_error(source, ": tensor 'visual.patch_embedding.weight' has shape ", patch.str(),
                      ", expected [dim, 3, p, p]");
  c.dim = patch[0];
  c.patch_size = patch[2];
  const int64_t positions = need("visual.pos_embedding").numel() / std::max<int64_t>(c.dim, 1);
  const auto grid =
      static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(positions - 1))));
  if (positions < 2 || grid * grid + 1 != positions)
    throw_input_error(source, ": the position table holds ", positions,
                      " positions, expected CLS + a square grid of patches");
  c.image_size = grid * c.patch_size;
  c.ffn_dim = need("visual.transformer.0.mlp.0.weight")[0];
  c.num_heads = (c.dim == 1280 || c.dim == 1024) ? 16 : std::max<int64_t>(1, c.dim / 64);
  c.num_layers = 0;
  while (shape_of("visual.transformer." + std::to_string(c.num_layers) + ".norm1.weight"))
    ++c.num_layers;
  c.validate(source);
  return c;
}

}  // namespace vidax::clip
