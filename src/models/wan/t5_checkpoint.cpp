#include "models/wan/t5_checkpoint.h"

#include <nlohmann/json.hpp>

#include "models/wan/t5_tensors.h"

namespace vidax::wan {
namespace {

constexpr const char* kTransformersProbe = "encoder.block.0.layer.0.SelfAttention.q.weight";

// Per-block renames, official suffix after "blocks.N." -> transformers suffix after
// "encoder.block.N.". umT5 (unlike T5 1.1) has a relative-position table in every block.
// FFN: transformers' T5DenseGatedActDense computes wo(act(wi_0(x)) * wi_1(x)), the official
// T5FeedForward fc2(fc1(x) * gate(x)) with gate = Sequential(Linear, GELU): wi_0 is the gate.
const std::vector<std::pair<std::string, std::string>>& block_renames() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"norm1.weight", "layer.0.layer_norm.weight"},
      {"attn.q.weight", "layer.0.SelfAttention.q.weight"},
      {"attn.k.weight", "layer.0.SelfAttention.k.weight"},
      {"attn.v.weight", "layer.0.SelfAttention.v.weight"},
      {"attn.o.weight", "layer.0.SelfAttention.o.weight"},
      {"pos_embedding.embedding.weight", "layer.0.SelfAttention.relative_attention_bias.weight"},
      {"norm2.weight", "layer.1.layer_norm.weight"},
      {"ffn.gate.0.weight", "layer.1.DenseReluDense.wi_0.weight"},
      {"ffn.fc1.weight", "layer.1.DenseReluDense.wi_1.weight"},
      {"ffn.fc2.weight", "layer.1.DenseReluDense.wo.weight"},
  };
  return table;
}

const std::vector<std::pair<std::string, std::string>>& top_renames() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"token_embedding.weight", "shared.weight"},
      {"norm.weight", "encoder.final_layer_norm.weight"},
  };
  return table;
}

// A transformers config.json (with d_model): official Wan folders keep the DiT's config.json
// next to the T5 file, which must not count.
bool is_t5_config_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("d_model");
}

}  // namespace

const std::vector<CheckpointLayout>& t5_layouts() {
  static const std::vector<CheckpointLayout> table = {
      {static_cast<int>(T5Layout::kOfficial),
       "official",
       any_marker({"blocks.0.attn.q.weight", "token_embedding.weight"}),
       {}},
      // transformers names may sit under a prefix (e.g. a text encoder saved out of a bigger
      // checkpoint), found from the probe tensor.
      {static_cast<int>(T5Layout::kTransformers), "transformers (diffusers / ComfyUI)",
       [](const CheckpointNames& names) { return names.prefix_of(kTransformersProbe); },
       [](const std::string& n, const std::string& p, const CheckpointNames& names) {
         // transformers ties the embedding: files hold "shared.weight",
         // "encoder.embed_tokens.weight" or both (the same values).
         if (n == "token_embedding.weight" && !names.contains(p + "shared.weight"))
           return p + "encoder.embed_tokens.weight";
         return p + t5_official_to_transformers(n);
       }},
  };
  return table;
}

std::string t5_layout_name(T5Layout layout) {
  return checkpoint_layout_name(t5_layouts(), static_cast<int>(layout));
}

std::string t5_official_to_transformers(const std::string& official) {
  for (const auto& [from, to] : top_renames())
    if (official == from) return to;
  if (!official.starts_with("blocks.")) return official;
  const size_t dot = official.find('.', 7);
  if (dot == std::string::npos) return official;
  const std::string index = official.substr(7, dot - 7);
  const std::string rest = official.substr(dot + 1);
  for (const auto& [from, to] : block_renames())
    if (rest == from) return str_cat("encoder.block.", index, ".", to);
  return official;
}

T5Checkpoint T5Checkpoint::open(const std::string& path,
                                const std::optional<T5Config>& config_override) {
  T5Checkpoint ck;
  static_cast<Checkpoint&>(ck) =
      Checkpoint::open(path, t5_layouts(),
                       str_cat("not a umT5 text encoder checkpoint: expected "
                               "'blocks.0.attn.q.weight' (official) or '",
                               kTransformersProbe, "' (diffusers / transformers / ComfyUI)"));

  // Config: explicit override, then a transformers config.json, then the file's metadata, then
  // inference from the shapes.
  if (config_override) {
    ck.config_ = *config_override;
    ck.config_source_ = "override";
  } else if (auto text = find_config_text(ck, is_t5_config_json, {"config"})) {
    ck.config_ = t5_config_from_json(text->text, text->where);
    ck.config_source_ = text->source;
  } else {
    ck.config_ = infer_t5_config([&](const std::string& n) { return ck.layout_shape(n); }, path);
    ck.config_source_ = "inferred from tensor shapes";
  }

  // Not weights: the tied copy of the embedding and the tokenizer ComfyUI files embed as a
  // byte tensor (under the transformers prefix, when the file has transformers names).
  const std::optional<std::string> prefix = ck.names().prefix_of(kTransformersProbe);
  Checkpoint::CheckOptions options;
  options.ignore = [prefix](const std::string& n) {
    if (n == "spiece_model") return true;
    return prefix &&
           (n == *prefix + "encoder.embed_tokens.weight" || n == *prefix + "spiece_model");
  };
  ck.check(t5_tensor_decls(ck.config_), options);
  return ck;
}

void T5Checkpoint::require_loadable() const {
  const std::string model = t5_layout_name(layout()) + " umT5 encoder";
  Checkpoint::require_loadable(
      {str_cat(" for umT5 config ", config_.to_json(), " (", config_source_, ")"), model,
       model + " with config " + config_.to_json()});
}

}  // namespace vidax::wan
