#include "models/wan/dit_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "core/convert.h"
#include "models/wan/comfy_fp8.h"
#include "models/wan/dit_tensors.h"

namespace vidax::wan {
namespace {

namespace fs = std::filesystem;

constexpr const char* kComfyPrefix = "model.diffusion_model.";

// Sequential substring replacement, the way diffusers' conversion script applies its table.
// Order matters: longer/more specific keys first where they overlap.
const std::vector<std::pair<std::string, std::string>>& diffusers_renames() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"time_embedding.0", "condition_embedder.time_embedder.linear_1"},
      {"time_embedding.2", "condition_embedder.time_embedder.linear_2"},
      {"text_embedding.0", "condition_embedder.text_embedder.linear_1"},
      {"text_embedding.2", "condition_embedder.text_embedder.linear_2"},
      {"time_projection.1", "condition_embedder.time_proj"},
      {"head.modulation", "scale_shift_table"},
      {"head.head", "proj_out"},
      {"modulation", "scale_shift_table"},
      {"ffn.0", "ffn.net.0.proj"},
      {"ffn.2", "ffn.net.2"},
      // norm2 of the official model has no parameters; official norm3 becomes diffusers norm2.
      {"norm3", "norm2"},
      {"self_attn.q", "attn1.to_q"},
      {"self_attn.k", "attn1.to_k"},
      {"self_attn.v", "attn1.to_v"},
      {"self_attn.o", "attn1.to_out.0"},
      {"self_attn.norm_q", "attn1.norm_q"},
      {"self_attn.norm_k", "attn1.norm_k"},
      {"cross_attn.k_img", "attn2.add_k_proj"},
      {"cross_attn.v_img", "attn2.add_v_proj"},
      {"cross_attn.norm_k_img", "attn2.norm_added_k"},
      {"cross_attn.q", "attn2.to_q"},
      {"cross_attn.k", "attn2.to_k"},
      {"cross_attn.v", "attn2.to_v"},
      {"cross_attn.o", "attn2.to_out.0"},
      {"cross_attn.norm_q", "attn2.norm_q"},
      {"cross_attn.norm_k", "attn2.norm_k"},
      {"img_emb.proj.0", "condition_embedder.image_embedder.norm1"},
      {"img_emb.proj.1", "condition_embedder.image_embedder.ff.net.0.proj"},
      {"img_emb.proj.3", "condition_embedder.image_embedder.ff.net.2"},
      {"img_emb.proj.4", "condition_embedder.image_embedder.norm2"},
  };
  return table;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// config.json beside the checkpoint (or inside the folder).
std::optional<fs::path> find_config_json(const std::string& path) {
  fs::path p(path);
  fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  if (dir.empty()) dir = ".";
  fs::path c = dir / "config.json";
  if (fs::is_regular_file(c)) return c;
  return std::nullopt;
}

}  // namespace

std::string layout_name(DitLayout layout) {
  switch (layout) {
    case DitLayout::kOfficial:
      return "official";
    case DitLayout::kDiffusers:
      return "diffusers";
    case DitLayout::kComfyUI:
      return "comfyui";
  }
  return "?";
}

std::string official_to_diffusers(const std::string& official) {
  // Rename only the part after "blocks.N." (or the whole name for top-level tensors), applying
  // the first matching rule: a single rule covers each name.
  std::string prefix, rest = official;
  if (starts_with(official, "blocks.")) {
    const size_t dot = official.find('.', 7);
    prefix = official.substr(0, dot + 1);
    rest = official.substr(dot + 1);
  }
  for (const auto& [from, to] : diffusers_renames()) {
    if (starts_with(rest, from) && (rest.size() == from.size() || rest[from.size()] == '.')) {
      if (prefix.empty() && from == "modulation") continue;  // top-level is head.modulation
      return prefix + to + rest.substr(from.size());
    }
  }
  return official;
}

DitCheckpoint DitCheckpoint::open(const std::string& path,
                                  const std::optional<DitConfig>& config_override) {
  DitCheckpoint ck;
  ck.path_ = path;
  ck.source_ = TensorSource::open(path);
  const std::vector<std::string> names = ck.source_.names();
  const std::set<std::string> name_set(names.begin(), names.end());

  // Layout detection.
  const bool comfy = std::any_of(names.begin(), names.end(),
                                 [](const std::string& n) { return starts_with(n, kComfyPrefix); });
  const bool diffusers = name_set.count("condition_embedder.time_embedder.linear_1.weight") ||
                         name_set.count("blocks.0.attn1.to_q.weight");
  const bool official =
      name_set.count("blocks.0.self_attn.q.weight") || name_set.count("patch_embedding.weight");
  std::function<std::string(const std::string&)> to_file;
  if (comfy) {
    ck.layout_ = DitLayout::kComfyUI;
    to_file = [](const std::string& n) { return kComfyPrefix + n; };
  } else if (diffusers) {
    ck.layout_ = DitLayout::kDiffusers;
    to_file = official_to_diffusers;
  } else if (official) {
    ck.layout_ = DitLayout::kOfficial;
    to_file = [](const std::string& n) { return n; };
  } else {
    std::string some;
    for (size_t i = 0; i < names.size() && i < 3; ++i) some += (i ? ", " : "") + names[i];
    throw_input_error(path,
                      ": not a Wan DiT checkpoint: expected 'blocks.0.self_attn.q.weight' "
                      "(official), 'blocks.0.attn1.to_q.weight' (diffusers) or "
                      "'model.diffusion_model.*' (ComfyUI); found ",
                      names.size(), " tensors such as ", some.empty() ? "(none)" : some);
  }

  // Config: explicit override, then config.json, then the file's metadata, then inference.
  const auto& meta = ck.source_.metadata();
  if (config_override) {
    ck.config_ = *config_override;
    ck.config_source_ = "override";
  } else if (auto cj = find_config_json(path)) {
    ck.config_ = dit_config_from_json(read_text(*cj), cj->string());
    ck.config_source_ = cj->string();
  } else if (meta.count("config") || meta.count("source_config")) {
    // vidax-written and fixture files keep the official constructor kwargs in the metadata
    // ("source_config" for files converted to diffusers names).
    std::string text = meta.count("config") ? meta.at("config") : meta.at("source_config");
    if (meta.count("model_type") && text.find("model_type") == std::string::npos) {
      // The fixtures keep model_type beside the constructor kwargs.
      text.insert(text.find('{') + 1, "\"model_type\": \"" + meta.at("model_type") + "\", ");
    }
    ck.config_ = dit_config_from_json(text, path + " (safetensors metadata)");
    ck.config_source_ = "file metadata";
  } else {
    ck.config_ = infer_dit_config(
        [&](const std::string& official_name) -> std::optional<Shape> {
          const std::string n = to_file(official_name);
          if (!ck.source_.contains(n)) return std::nullopt;
          return ck.source_.entry(n).shape;
        },
        path);
    ck.config_source_ = "inferred from tensor shapes";
  }

  // Check every declared tensor.
  std::set<std::string> used;
  for (const TensorDecl& d : dit_tensor_decls(ck.config_)) {
    const std::string fname = to_file(d.name);
    if (!ck.source_.contains(fname)) {
      ck.missing_.push_back(d.name);
      continue;
    }
    used.insert(fname);
    ck.to_file_[d.name] = fname;
    const TensorEntry& e = ck.source_.entry(fname);
    Shape expected = d.shape;
    // diffusers keeps modulation tables as [1, 6, dim] too; accept [6, dim] squeezes.
    if (e.shape.numel() != expected.numel() ||
        (e.shape != expected && d.role != TensorRole::kVector)) {
      ck.mismatches_.push_back({fname, expected, e.shape});
    }
    if (!is_float(e.dtype))
      ck.bad_dtype_.push_back(fname + " (" + std::string(dtype_name(e.dtype)) + ")");
    if (auto scale = scale_weight_name(fname); scale && ck.source_.contains(*scale))
      used.insert(*scale);  // ComfyUI scaled fp8: consumed by get()
  }
  for (const auto& n : names) {
    if (used.count(n)) continue;
    if (is_scaled_fp8_bookkeeping(n)) continue;
    ck.unexpected_.push_back(n);
  }
  return ck;
}

void DitCheckpoint::require_loadable() const {
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 4) s += str_cat(" and ", v.size() - 4, " more");
    return s;
  };
  if (!mismatches_.empty()) {
    const auto& m = mismatches_.front();
    throw_input_error(
        path_, ": tensor '", m.name, "' has shape ", m.actual.str(), ", expected ",
        m.expected.str(), " for config ", config_.to_json(),
        mismatches_.size() > 1 ? str_cat(" (", mismatches_.size() - 1, " more)") : "");
  }
  if (!missing_.empty())
    throw_input_error(path_, ": ", missing_.size(), " tensor(s) missing for a ",
                      layout_name(layout_), " Wan ", config_.kind_name(), " DiT: ", list(missing_));
  if (!bad_dtype_.empty())
    throw_input_error(path_, ": unsupported dtype (expected a float type): ", list(bad_dtype_));
  if (!unexpected_.empty())
    throw_input_error(path_, ": ", unexpected_.size(), " unexpected tensor(s) for a ",
                      layout_name(layout_), " Wan ", config_.kind_name(), " DiT with config ",
                      config_.to_json(), ": ", list(unexpected_));
}

std::string DitCheckpoint::file_name(const std::string& official) const {
  auto it = to_file_.find(official);
  VIDAX_CHECK(it != to_file_.end(), "tensor ", official, " not resolved");
  return it->second;
}

Tensor DitCheckpoint::get(const std::string& official) const {
  return read_scaled_weight(source_, file_name(official), path_);
}

std::function<Tensor(const std::string&)> DitCheckpoint::loader() const {
  auto handed_out = std::make_shared<size_t>(0);
  return [this, handed_out](const std::string& official) {
    constexpr size_t kReleaseEvery = size_t{256} << 20;
    if (*handed_out >= kReleaseEvery) {
      source_.release_resident_pages();
      *handed_out = 0;
    }
    Tensor t = get(official);
    *handed_out += t.nbytes();
    return t;
  };
}

}  // namespace vidax::wan
