#include "models/wan/vae_checkpoint.h"

#include <nlohmann/json.hpp>

#include "models/wan/vae_tensors.h"

namespace vidax::wan {
namespace {

// Residual-block parameter names: official -> diffusers.
const std::vector<std::pair<std::string, std::string>>& resnet_renames() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"residual.0.", "norm1."}, {"residual.2.", "conv1."},       {"residual.3.", "norm2."},
      {"residual.6.", "conv2."}, {"shortcut.", "conv_shortcut."},
  };
  return table;
}

// Whole-prefix renames shared by both versions, applied first.
const std::vector<std::pair<std::string, std::string>>& fixed_renames() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"conv1.", "quant_conv."},
      {"conv2.", "post_quant_conv."},
      {"encoder.conv1.", "encoder.conv_in."},
      {"decoder.conv1.", "decoder.conv_in."},
      {"encoder.head.0.", "encoder.norm_out."},
      {"encoder.head.2.", "encoder.conv_out."},
      {"decoder.head.0.", "decoder.norm_out."},
      {"decoder.head.2.", "decoder.conv_out."},
      {"encoder.middle.1.", "encoder.mid_block.attentions.0."},
      {"decoder.middle.1.", "decoder.mid_block.attentions.0."},
  };
  return table;
}

std::string rename_resnet(const std::string& rest) {
  for (const auto& [from, to] : resnet_renames())
    if (rest.starts_with(from)) return to + rest.substr(from.size());
  return rest;
}

// Splits "<index>.<rest>" at the first dot.
std::pair<int64_t, std::string> split_index(const std::string& s) {
  const size_t dot = s.find('.');
  return {std::stoll(s.substr(0, dot)), s.substr(dot + 1)};
}

// A diffusers AutoencoderKLWan config (base_dim / _class_name) or the official VAE kwargs
// (z_dim with dim_mult); a DiT or T5 config.json in the same folder is not one.
bool is_vae_config_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object()) return false;
    if (j.contains("_class_name") && j["_class_name"].is_string())
      return j["_class_name"].get<std::string>().find("Autoencoder") != std::string::npos;
    return j.contains("base_dim") || (j.contains("z_dim") && j.contains("dim_mult"));
  } catch (const nlohmann::json::exception&) {
    return true;  // let the parser report the syntax error with the file name
  }
}

}  // namespace

const std::vector<CheckpointLayout>& vae_layouts() {
  static const std::vector<CheckpointLayout> table = {
      // The official names under a prefix (ComfyUI / LDM-style bundles); the last match wins.
      {static_cast<int>(VaeLayout::kPrefixed),
       "official (prefixed)",
       [](const CheckpointNames& names) -> std::optional<std::string> {
         std::optional<std::string> prefix;
         for (const std::string p : {"first_stage_model.", "vae."})
           if (names.contains(p + "encoder.conv1.weight") ||
               names.contains(p + "decoder.conv1.weight"))
             prefix = p;
         return prefix;
       },
       {}},
      // For inference before the config is known: the version shows in the official name itself
      // (Wan 2.2 nests blocks in stages); the 2.1 decoder numbering assumes num_res_blocks = 2,
      // as every released Wan VAE has.
      {static_cast<int>(VaeLayout::kDiffusers), "diffusers",
       any_marker({"decoder.conv_in.weight", "post_quant_conv.weight"}),
       [](const std::string& n, const std::string&, const CheckpointNames&) {
         VaeConfig c;
         const bool nested = n.find(".downsamples.") != n.rfind(".downsamples.") ||
                             n.find(".upsamples.") != n.rfind(".upsamples.");
         c.version = nested ? VaeVersion::kWan22 : VaeVersion::kWan21;
         return vae_official_to_diffusers(n, c);
       }},
      {static_cast<int>(VaeLayout::kOfficial),
       "official",
       any_marker({"decoder.conv1.weight", "conv2.weight"}),
       {}},
  };
  return table;
}

std::string vae_layout_name(VaeLayout layout) {
  return checkpoint_layout_name(vae_layouts(), static_cast<int>(layout));
}

std::string vae_official_to_diffusers(const std::string& n, const VaeConfig& c) {
  for (const auto& [from, to] : fixed_renames())
    if (n.starts_with(from)) return to + n.substr(from.size());
  for (const char* coder : {"encoder.", "decoder."}) {
    const std::string mid = std::string(coder) + "middle.";
    if (n.starts_with(mid)) {
      auto [idx, rest] = split_index(n.substr(mid.size()));
      return std::string(coder) + "mid_block.resnets." + std::to_string(idx == 0 ? 0 : 1) + "." +
             rename_resnet(rest);
    }
  }
  const bool v22 = c.version == VaeVersion::kWan22;
  if (n.starts_with("encoder.downsamples.")) {
    auto [stage, rest] = split_index(n.substr(20));
    if (!v22) {
      return "encoder.down_blocks." + std::to_string(stage) + "." + rename_resnet(rest);
    }
    auto [j, inner] = split_index(rest.substr(12));  // "downsamples."
    if (inner.starts_with("resample.") || inner.starts_with("time_conv."))
      return "encoder.down_blocks." + std::to_string(stage) + ".downsampler." + inner;
    return "encoder.down_blocks." + std::to_string(stage) + ".resnets." + std::to_string(j) + "." +
           rename_resnet(inner);
  }
  if (n.starts_with("decoder.upsamples.")) {
    auto [flat, rest] = split_index(n.substr(18));
    if (!v22) {
      const int64_t per = c.num_res_blocks + 2;  // residual blocks + resample per stage
      const int64_t stage = flat / per, j = flat % per;
      if (j <= c.num_res_blocks)
        return "decoder.up_blocks." + std::to_string(stage) + ".resnets." + std::to_string(j) +
               "." + rename_resnet(rest);
      return "decoder.up_blocks." + std::to_string(stage) + ".upsamplers.0." + rest;
    }
    auto [j, inner] = split_index(rest.substr(10));  // "upsamples."
    if (inner.starts_with("resample.") || inner.starts_with("time_conv."))
      return "decoder.up_blocks." + std::to_string(flat) + ".upsampler." + inner;
    return "decoder.up_blocks." + std::to_string(flat) + ".resnets." + std::to_string(j) + "." +
           rename_resnet(inner);
  }
  return n;
}

VaeCheckpoint VaeCheckpoint::open(const std::string& path,
                                  const std::optional<VaeConfig>& config_override) {
  VaeCheckpoint ck;
  static_cast<Checkpoint&>(ck) =
      Checkpoint::open(path, vae_layouts(),
                       "not a Wan VAE checkpoint: expected 'decoder.conv1.weight' (official) "
                       "or 'decoder.conv_in.weight' (diffusers)");

  // Config before names: the diffusers stage numbering depends on it. Only a VAE config.json
  // counts: the official Wan folder keeps the DiT's config.json beside Wan2.1_VAE.pth.
  if (config_override) {
    ck.config_ = *config_override;
    ck.config_source_ = "override";
  } else if (auto text = find_config_text(ck, is_vae_config_json, {"config", "source_config"})) {
    ck.config_ = vae_config_from_json(text->text, text->where);
    ck.config_source_ = text->source;
  } else {
    ck.config_ = infer_vae_config([&](const std::string& n) { return ck.layout_shape(n); }, path);
    ck.config_source_ = "inferred from tensor shapes";
  }

  Checkpoint::CheckOptions options;
  options.scaled_fp8 = false;
  options.vector_reshape = false;
  // With a prefix (a VAE inside a bigger checkpoint), names outside it belong to other models.
  if (const std::string prefix = ck.prefix(); !prefix.empty())
    options.ignore = [prefix](const std::string& n) { return !n.starts_with(prefix); };
  if (ck.layout() == VaeLayout::kDiffusers) {
    options.to_file = [config = ck.config_](const std::string& n) {
      return vae_official_to_diffusers(n, config);
    };
  }
  ck.check(vae_tensor_decls(ck.config_), options);
  return ck;
}

void VaeCheckpoint::require_loadable() const {
  const std::string what = str_cat(vae_layout_name(layout()), " Wan ", config_.version_name(),
                                   " VAE with config ", config_.to_json());
  Checkpoint::require_loadable({" for a " + what, what, what, /*dtype_is_problem=*/true});
}

}  // namespace vidax::wan
