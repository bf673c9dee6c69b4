#include "models/wan/t5_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/wan/comfy_fp8.h"
#include "models/wan/t5_tensors.h"

namespace vidax::wan {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTransformersProbe = "encoder.block.0.layer.0.SelfAttention.q.weight";

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

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

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A transformers config.json beside the checkpoint (or inside the folder). Official Wan folders
// keep the DiT's config.json next to the T5 file, so only a T5 config (with d_model) counts.
std::optional<fs::path> find_t5_config_json(const std::string& path) {
  fs::path p(path);
  fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  if (dir.empty()) dir = ".";
  const fs::path c = dir / "config.json";
  if (!fs::is_regular_file(c)) return std::nullopt;
  const std::string text = read_text(c);
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("d_model")) return std::nullopt;
  return c;
}

std::string list_names(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > 4) s += str_cat(" and ", v.size() - 4, " more");
  return s;
}

}  // namespace

std::string t5_layout_name(T5Layout layout) {
  switch (layout) {
    case T5Layout::kOfficial:
      return "official";
    case T5Layout::kTransformers:
      return "transformers (diffusers / ComfyUI)";
  }
  return "?";
}

std::string t5_official_to_transformers(const std::string& official) {
  for (const auto& [from, to] : top_renames())
    if (official == from) return to;
  if (!starts_with(official, "blocks.")) return official;
  const size_t dot = official.find('.', 7);
  if (dot == std::string::npos) return official;
  const std::string index = official.substr(7, dot - 7);
  const std::string rest = official.substr(dot + 1);
  for (const auto& [from, to] : block_renames())
    if (rest == from) return "encoder.block." + index + "." + to;
  return official;
}

T5Checkpoint T5Checkpoint::open(const std::string& path,
                                const std::optional<T5Config>& config_override) {
  T5Checkpoint ck;
  ck.path_ = path;
  ck.source_ = TensorSource::open(path);
  const std::vector<std::string> names = ck.source_.names();
  const std::set<std::string> name_set(names.begin(), names.end());

  // Layout detection; transformers names may sit under a prefix (e.g. a text encoder saved out
  // of a bigger checkpoint), found from the probe tensor.
  std::optional<std::string> prefix;
  for (const auto& n : names) {
    if (ends_with(n, kTransformersProbe)) {
      prefix = n.substr(0, n.size() - std::string(kTransformersProbe).size());
      break;
    }
  }
  std::function<std::string(const std::string&)> to_file;
  if (name_set.count("blocks.0.attn.q.weight") || name_set.count("token_embedding.weight")) {
    ck.layout_ = T5Layout::kOfficial;
    to_file = [](const std::string& n) { return n; };
  } else if (prefix) {
    ck.layout_ = T5Layout::kTransformers;
    const std::string p = *prefix;
    // transformers ties the embedding: files hold "shared.weight", "encoder.embed_tokens.weight"
    // or both (the same values).
    const bool shared = name_set.count(p + "shared.weight") != 0;
    to_file = [p, shared](const std::string& n) {
      if (n == "token_embedding.weight" && !shared) return p + "encoder.embed_tokens.weight";
      return p + t5_official_to_transformers(n);
    };
  } else {
    std::string some;
    for (size_t i = 0; i < names.size() && i < 3; ++i) some += (i ? ", " : "") + names[i];
    throw_input_error(path,
                      ": not a umT5 text encoder checkpoint: expected 'blocks.0.attn.q.weight' "
                      "(official) or '",
                      kTransformersProbe, "' (diffusers / transformers / ComfyUI); found ",
                      names.size(), " tensors such as ", some.empty() ? "(none)" : some);
  }

  // Config: explicit override, then a transformers config.json, then the file's metadata, then
  // inference from the shapes.
  const auto& meta = ck.source_.metadata();
  if (config_override) {
    ck.config_ = *config_override;
    ck.config_source_ = "override";
  } else if (auto cj = find_t5_config_json(path)) {
    ck.config_ = t5_config_from_json(read_text(*cj), cj->string());
    ck.config_source_ = cj->string();
  } else if (meta.count("config")) {
    ck.config_ = t5_config_from_json(meta.at("config"), path + " (safetensors metadata)");
    ck.config_source_ = "file metadata";
  } else {
    ck.config_ = infer_t5_config(
        [&](const std::string& official_name) -> std::optional<Shape> {
          const std::string n = to_file(official_name);
          if (!ck.source_.contains(n)) return std::nullopt;
          return ck.source_.entry(n).shape;
        },
        path);
    ck.config_source_ = "inferred from tensor shapes";
  }

  std::set<std::string> used;
  for (const TensorDecl& d : t5_tensor_decls(ck.config_)) {
    const std::string fname = to_file(d.name);
    if (!ck.source_.contains(fname)) {
      ck.missing_.push_back(d.name);
      continue;
    }
    used.insert(fname);
    ck.to_file_[d.name] = fname;
    const TensorEntry& e = ck.source_.entry(fname);
    if (e.shape != d.shape &&
        !(d.role == TensorRole::kVector && e.shape.numel() == d.shape.numel()))
      ck.mismatches_.push_back({fname, d.shape, e.shape});
    if (!is_float(e.dtype))
      ck.bad_dtype_.push_back(fname + " (" + std::string(dtype_name(e.dtype)) + ")");
    if (auto scale = scale_weight_name(fname); scale && ck.source_.contains(*scale))
      used.insert(*scale);  // consumed by get()
  }
  for (const auto& n : names) {
    if (used.count(n) || is_scaled_fp8_bookkeeping(n)) continue;
    if (prefix && n == *prefix + "encoder.embed_tokens.weight") continue;  // tied copy
    // ComfyUI files embed the tokenizer as a byte tensor; it is not a weight.
    if (n == "spiece_model" || (prefix && n == *prefix + "spiece_model")) continue;
    ck.unexpected_.push_back(n);
  }
  return ck;
}

void T5Checkpoint::require_loadable() const {
  if (!mismatches_.empty()) {
    const auto& m = mismatches_.front();
    throw_input_error(
        path_, ": tensor '", m.name, "' has shape ", m.actual.str(), ", expected ",
        m.expected.str(), " for umT5 config ", config_.to_json(), " (", config_source_, ")",
        mismatches_.size() > 1 ? str_cat(" (", mismatches_.size() - 1, " more)") : "");
  }
  if (!missing_.empty())
    throw_input_error(path_, ": ", missing_.size(), " tensor(s) missing for a ",
                      t5_layout_name(layout_), " umT5 encoder: ", list_names(missing_));
  if (!bad_dtype_.empty())
    throw_input_error(path_,
                      ": unsupported dtype (expected a float type): ", list_names(bad_dtype_));
  if (!unexpected_.empty())
    throw_input_error(path_, ": ", unexpected_.size(), " unexpected tensor(s) for a ",
                      t5_layout_name(layout_), " umT5 encoder with config ", config_.to_json(),
                      ": ", list_names(unexpected_));
}

std::string T5Checkpoint::file_name(const std::string& official) const {
  auto it = to_file_.find(official);
  VIDAX_CHECK(it != to_file_.end(), "tensor ", official, " not resolved");
  return it->second;
}

Tensor T5Checkpoint::get(const std::string& official) const {
  return read_scaled_weight(source_, file_name(official), path_);
}

std::function<Tensor(const std::string&)> T5Checkpoint::loader() const {
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
