#include "models/clip/clip_checkpoint.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vidax::clip {
namespace {

constexpr const char* kOfficialProbe = "visual.patch_embedding.weight";
constexpr const char* kTransformersProbe = "vision_model.embeddings.patch_embedding.weight";

const std::vector<std::pair<std::string, std::string>>& block_renames() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"norm1.", "layer_norm1."},
      {"norm2.", "layer_norm2."},
      {"attn.to_q.", "self_attn.q_proj."},
      {"attn.to_k.", "self_attn.k_proj."},
      {"attn.to_v.", "self_attn.v_proj."},
      {"attn.proj.", "self_attn.out_proj."},
      {"mlp.0.", "mlp.fc1."},
      {"mlp.2.", "mlp.fc2."},
  };
  return table;
}

// A transformers CLIP config.json (the DiT's config.json may sit in the same folder).
bool is_clip_config_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  if (j.contains("vision_config")) return true;
  return j.contains("hidden_size") && j.contains("patch_size");
}

}  // namespace

std::string clip_official_to_transformers(const std::string& official) {
  static const std::vector<std::pair<std::string, std::string>> top = {
      {"visual.patch_embedding.weight", "vision_model.embeddings.patch_embedding.weight"},
      {"visual.cls_embedding", "vision_model.embeddings.class_embedding"},
      {"visual.pos_embedding", "vision_model.embeddings.position_embedding.weight"},
      {"visual.pre_norm.weight", "vision_model.pre_layrnorm.weight"},
      {"visual.pre_norm.bias", "vision_model.pre_layrnorm.bias"},
  };
  for (const auto& [from, to] : top)
    if (official == from) return to;
  const std::string blocks = "visual.transformer.";
  if (!official.starts_with(blocks)) return official;
  const size_t dot = official.find('.', blocks.size());
  if (dot == std::string::npos) return official;
  const std::string index = official.substr(blocks.size(), dot - blocks.size());
  const std::string rest = official.substr(dot + 1);
  for (const auto& [from, to] : block_renames())
    if (rest.starts_with(from))
      return str_cat("vision_model.encoder.layers.", index, ".", to, rest.substr(from.size()));
  return official;
}

const std::vector<CheckpointLayout>& clip_layouts() {
  static const std::vector<CheckpointLayout> table = {
      {static_cast<int>(ClipLayout::kOfficial), "official", any_marker({kOfficialProbe}), {}},
      {static_cast<int>(ClipLayout::kTransformers), "transformers (diffusers / ComfyUI)",
       [](const CheckpointNames& names) { return names.prefix_of(kTransformersProbe); },
       [](const std::string& n, const std::string& p, const CheckpointNames&) {
         return p + clip_official_to_transformers(n);
       }},
  };
  return table;
}

std::string clip_layout_name(ClipLayout layout) {
  return checkpoint_layout_name(clip_layouts(), static_cast<int>(layout));
}

bool looks_like_clip_vision(const CheckpointNames& names) {
  return names.contains(kOfficialProbe) || names.prefix_of(kTransformersProbe).has_value();
}

ClipCheckpoint ClipCheckpoint::open(const std::string& path,
                                    const std::optional<ClipVisionConfig>& config_override) {
  ClipCheckpoint ck;
  static_cast<Checkpoint&>(ck) =
      Checkpoint::open(path, clip_layouts(),
                       str_cat("not a CLIP image encoder checkpoint: expected '", kOfficialProbe,
                               "' (official) or '", kTransformersProbe,
                               "' (diffusers image_encoder / transformers / ComfyUI)"));
  if (config_override) {
    ck.config_ = *config_override;
    ck.config_source_ = "override";
  } else if (auto text = find_config_text(ck, is_clip_config_json, {"config"})) {
    ck.config_ = clip_vision_config_from_json(text->text, text->where);
    ck.config_source_ = text->source;
  } else {
    ck.config_ =
        infer_clip_vision_config([&](const std::string& n) { return ck.layout_shape(n); }, path);
    ck.config_source_ = "inferred from tensor shapes";
  }
  // What the features do not use: the text tower, the final norm and projection head (and
  // transformers' position-id buffer).
  const std::string prefix = ck.prefix();
  Checkpoint::CheckOptions options;
  options.ignore = [prefix](const std::string& n) {
    if (n.starts_with("textual.") || n == "log_scale" || n.starts_with("visual.post_norm.") ||
        n == "visual.head")
      return true;
    if (!n.starts_with(prefix)) return false;
    const std::string r = n.substr(prefix.size());
    return r.starts_with("text_model.") || r.starts_with("vision_model.post_layernorm.") ||
           r == "visual_projection.weight" || r == "text_projection.weight" || r == "logit_scale" ||
           r == "vision_model.embeddings.position_ids";
  };
  ck.check(clip_vision_tensor_decls(ck.config_, ck.qkv()), options);
  return ck;
}

void ClipCheckpoint::require_loadable() const {
  const std::string model = clip_layout_name(layout()) + " CLIP vision encoder";
  Checkpoint::require_loadable(
      {str_cat(" for CLIP vision config ", config_.to_json(), " (", config_source_, ")"), model,
       model + " with config " + config_.to_json()});
}

}  // namespace vidax::clip
