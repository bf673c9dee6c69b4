#include "models/wan/vae_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "models/wan/vae_tensors.h"

namespace vidax::wan {
namespace {

namespace fs = std::filesystem;

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

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
    if (starts_with(rest, from)) return to + rest.substr(from.size());
  return rest;
}

// Splits "<index>.<rest>" at the first dot.
std::pair<int64_t, std::string> split_index(const std::string& s) {
  const size_t dot = s.find('.');
  return {std::stoll(s.substr(0, dot)), s.substr(dot + 1)};
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

std::string vae_layout_name(VaeLayout layout) {
  switch (layout) {
    case VaeLayout::kOfficial:
      return "official";
    case VaeLayout::kDiffusers:
      return "diffusers";
    case VaeLayout::kPrefixed:
      return "official (prefixed)";
  }
  return "?";
}

std::string vae_official_to_diffusers(const std::string& n, const VaeConfig& c) {
  for (const auto& [from, to] : fixed_renames())
    if (starts_with(n, from)) return to + n.substr(from.size());
  for (const char* coder : {"encoder.", "decoder."}) {
    const std::string mid = std::string(coder) + "middle.";
    if (starts_with(n, mid)) {
      auto [idx, rest] = split_index(n.substr(mid.size()));
      return std::string(coder) + "mid_block.resnets." + std::to_string(idx == 0 ? 0 : 1) + "." +
             rename_resnet(rest);
    }
  }
  const bool v22 = c.version == VaeVersion::kWan22;
  if (starts_with(n, "encoder.downsamples.")) {
    auto [stage, rest] = split_index(n.substr(20));
    if (!v22) {
      return "encoder.down_blocks." + std::to_string(stage) + "." + rename_resnet(rest);
    }
    auto [j, inner] = split_index(rest.substr(12));  // "downsamples."
    if (starts_with(inner, "resample.") || starts_with(inner, "time_conv."))
      return "encoder.down_blocks." + std::to_string(stage) + ".downsampler." + inner;
    return "encoder.down_blocks." + std::to_string(stage) + ".resnets." + std::to_string(j) + "." +
           rename_resnet(inner);
  }
  if (starts_with(n, "decoder.upsamples.")) {
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
    if (starts_with(inner, "resample.") || starts_with(inner, "time_conv."))
      return "decoder.up_blocks." + std::to_string(flat) + ".upsampler." + inner;
    return "decoder.up_blocks." + std::to_string(flat) + ".resnets." + std::to_string(j) + "." +
           rename_resnet(inner);
  }
  return n;
}

VaeCheckpoint VaeCheckpoint::open(const std::string& path,
                                  const std::optional<VaeConfig>& config_override) {
  VaeCheckpoint ck;
  ck.path_ = path;
  ck.source_ = TensorSource::open(path);
  const std::vector<std::string> names = ck.source_.names();
  const std::set<std::string> name_set(names.begin(), names.end());

  std::string prefix;
  for (const char* p : {"first_stage_model.", "vae."})
    if (name_set.count(std::string(p) + "encoder.conv1.weight") ||
        name_set.count(std::string(p) + "decoder.conv1.weight"))
      prefix = p;
  const bool diffusers =
      name_set.count("decoder.conv_in.weight") || name_set.count("post_quant_conv.weight");
  const bool official = name_set.count("decoder.conv1.weight") || name_set.count("conv2.weight");
  if (!prefix.empty()) {
    ck.layout_ = VaeLayout::kPrefixed;
  } else if (diffusers) {
    ck.layout_ = VaeLayout::kDiffusers;
  } else if (official) {
    ck.layout_ = VaeLayout::kOfficial;
  } else {
    std::string some;
    for (size_t i = 0; i < names.size() && i < 3; ++i) some += (i ? ", " : "") + names[i];
    throw_input_error(path,
                      ": not a Wan VAE checkpoint: expected 'decoder.conv1.weight' (official) or "
                      "'decoder.conv_in.weight' (diffusers); found ",
                      names.size(), " tensors such as ", some.empty() ? "(none)" : some);
  }

  // Config before names: the diffusers stage numbering depends on it.
  const auto& meta = ck.source_.metadata();
  fs::path p(path);
  fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  if (dir.empty()) dir = ".";
  if (config_override) {
    ck.config_ = *config_override;
    ck.config_source_ = "override";
  } else if (fs::is_regular_file(dir / "config.json") &&
             is_vae_config_json(read_text(dir / "config.json"))) {
    // Only a VAE config counts: the official Wan folder keeps the DiT's config.json beside
    // Wan2.1_VAE.pth.
    ck.config_ =
        vae_config_from_json(read_text(dir / "config.json"), (dir / "config.json").string());
    ck.config_source_ = (dir / "config.json").string();
  } else if (meta.count("config") || meta.count("source_config")) {
    const std::string text = meta.count("config") ? meta.at("config") : meta.at("source_config");
    ck.config_ = vae_config_from_json(text, path + " (safetensors metadata)");
    ck.config_source_ = "file metadata";
  } else {
    // Shapes by official name, mapped through the layout. The diffusers rules depend on the
    // version, which the official name itself shows (Wan 2.2 nests blocks in stages); the 2.1
    // decoder numbering assumes num_res_blocks = 2, as every released Wan VAE has.
    ck.config_ = infer_vae_config(
        [&](const std::string& official_name) -> std::optional<Shape> {
          std::string n = official_name;
          if (ck.layout_ == VaeLayout::kPrefixed) n = prefix + n;
          if (ck.layout_ == VaeLayout::kDiffusers) {
            VaeConfig c;
            const bool nested =
                official_name.find(".downsamples.") != official_name.rfind(".downsamples.") ||
                official_name.find(".upsamples.") != official_name.rfind(".upsamples.");
            c.version = nested ? VaeVersion::kWan22 : VaeVersion::kWan21;
            n = vae_official_to_diffusers(official_name, c);
          }
          if (!ck.source_.contains(n)) return std::nullopt;
          return ck.source_.entry(n).shape;
        },
        path);
    ck.config_source_ = "inferred from tensor shapes";
  }

  std::set<std::string> used;
  for (const TensorDecl& d : vae_tensor_decls(ck.config_)) {
    std::string fname = d.name;
    if (ck.layout_ == VaeLayout::kPrefixed) fname = prefix + d.name;
    if (ck.layout_ == VaeLayout::kDiffusers) fname = vae_official_to_diffusers(d.name, ck.config_);
    if (!ck.source_.contains(fname)) {
      ck.missing_.push_back(d.name);
      continue;
    }
    used.insert(fname);
    ck.to_file_[d.name] = fname;
    const TensorEntry& e = ck.source_.entry(fname);
    if (e.shape != d.shape)
      ck.problems_.push_back(
          str_cat("tensor '", fname, "' has shape ", e.shape.str(), ", expected ", d.shape.str()));
    if (!is_float(e.dtype))
      ck.problems_.push_back(str_cat("tensor '", fname, "' has dtype ", dtype_name(e.dtype),
                                     ", expected a float type"));
  }
  for (const auto& n : names)
    if (!used.count(n) && (prefix.empty() || starts_with(n, prefix))) ck.unexpected_.push_back(n);
  return ck;
}

void VaeCheckpoint::require_loadable() const {
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 4) s += str_cat(" and ", v.size() - 4, " more");
    return s;
  };
  const std::string what = str_cat(vae_layout_name(layout_), " Wan ", config_.version_name(),
                                   " VAE with config ", config_.to_json());
  if (!problems_.empty())
    throw_input_error(path_, ": ", problems_.front(), " for a ", what,
                      problems_.size() > 1 ? str_cat(" (", problems_.size() - 1, " more)") : "");
  if (!missing_.empty())
    throw_input_error(path_, ": ", missing_.size(), " tensor(s) missing for a ", what, ": ",
                      list(missing_));
  if (!unexpected_.empty())
    throw_input_error(path_, ": ", unexpected_.size(), " unexpected tensor(s) for a ", what, ": ",
                      list(unexpected_));
}

Tensor VaeCheckpoint::get(const std::string& official) const {
  auto it = to_file_.find(official);
  VIDAX_CHECK(it != to_file_.end(), "VAE tensor ", official, " not resolved");
  return source_.tensor(it->second);
}

}  // namespace vidax::wan
