#include "models/wan/dit_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vidax::wan {

void DitConfig::validate(const std::string& source) const {
  auto require = [&](bool ok, const char* what) {
    if (!ok) throw_input_error(source, ": invalid Wan DiT config: ", what);
  };
  require(dim > 0 && num_heads > 0 && dim % num_heads == 0, "dim must be a multiple of num_heads");
  require(head_dim() % 2 == 0 && head_dim() >= 6, "head_dim must be even and >= 6 (3-way RoPE)");
  require(num_layers > 0 && ffn_dim > 0 && freq_dim > 0 && freq_dim % 2 == 0,
          "num_layers, ffn_dim > 0 and freq_dim even");
  require(in_dim > 0 && out_dim > 0 && text_dim > 0 && text_len > 0, "dims must be positive");
  require(patch[0] > 0 && patch[1] > 0 && patch[2] > 0, "patch sizes must be positive");
  require(eps > 0, "eps must be positive");
  // Bounds well above Wan 14B (dim 5120, ffn 13824, 40 layers) that keep size products far from
  // int64 overflow and refuse absurd files before any allocation.
  require(dim <= 65536 && ffn_dim <= 262144 && num_layers <= 1024 && freq_dim <= 65536 &&
              in_dim <= 4096 && out_dim <= 4096 && text_dim <= 65536 && text_len <= 65536 &&
              clip_dim >= 0 && clip_dim <= 65536 && flf_pos_tokens >= 0 &&
              flf_pos_tokens <= 65536 && patch[0] <= 16 && patch[1] <= 16 && patch[2] <= 16,
          "sizes exceed what any Wan model uses");
}

std::string DitConfig::kind_name() const {
  switch (kind) {
    case DitKind::kT2V:
      return "t2v";
    case DitKind::kI2V:
      return flf_pos_tokens > 0 ? "flf2v" : "i2v";
    case DitKind::kTI2V:
      return "ti2v";
  }
  return "?";
}

std::string DitConfig::to_json() const {
  nlohmann::json j = {{"model_type", kind_name()},
                      {"patch_size", {patch[0], patch[1], patch[2]}},
                      {"text_len", text_len},
                      {"in_dim", in_dim},
                      {"dim", dim},
                      {"ffn_dim", ffn_dim},
                      {"freq_dim", freq_dim},
                      {"text_dim", text_dim},
                      {"out_dim", out_dim},
                      {"num_heads", num_heads},
                      {"num_layers", num_layers},
                      {"qk_norm", qk_norm},
                      {"cross_attn_norm", cross_attn_norm},
                      {"eps", eps}};
  if (causal) j["causal"] = true;
  return j.dump();
}

std::optional<DitConfig> dit_preset(const std::string& name) {
  DitConfig c;
  if (name == "wan2.1-t2v-1.3b") {
    c.dim = 1536, c.ffn_dim = 8960, c.num_heads = 12, c.num_layers = 30;
  } else if (name == "wan2.1-t2v-14b") {
    c.dim = 5120, c.ffn_dim = 13824, c.num_heads = 40, c.num_layers = 40;
  } else if (name == "wan2.1-i2v-14b") {
    c.kind = DitKind::kI2V;
    c.in_dim = 36, c.dim = 5120, c.ffn_dim = 13824, c.num_heads = 40, c.num_layers = 40;
  } else if (name == "wan2.2-ti2v-5b") {
    c.kind = DitKind::kTI2V;
    c.in_dim = 48, c.out_dim = 48, c.dim = 3072, c.ffn_dim = 14336, c.num_heads = 24,
    c.num_layers = 30;
  } else {
    return std::nullopt;
  }
  return c;
}

std::vector<std::string> dit_preset_names() {
  return {"wan2.1-t2v-1.3b", "wan2.1-t2v-14b", "wan2.1-i2v-14b", "wan2.2-ti2v-5b"};
}

namespace {

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_input_error(source, ": config key '", key, "' has the wrong type");
  }
}

}  // namespace

DitConfig dit_config_from_json(const std::string& json_text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(source, ": config is not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) throw_input_error(source, ": config must be a JSON object");
  DitConfig c;
  const bool diffusers = j.contains("num_attention_heads");
  if (diffusers) {
    const int64_t heads = get_or<int64_t>(j, "num_attention_heads", 12, source);
    const int64_t head_dim = get_or<int64_t>(j, "attention_head_dim", 128, source);
    c.num_heads = heads;
    c.dim = heads * head_dim;
    c.in_dim = get_or<int64_t>(j, "in_channels", 16, source);
    c.out_dim = get_or<int64_t>(j, "out_channels", 16, source);
    c.ffn_dim = get_or<int64_t>(j, "ffn_dim", 8960, source);
    c.freq_dim = get_or<int64_t>(j, "freq_dim", 256, source);
    c.text_dim = get_or<int64_t>(j, "text_dim", 4096, source);
    c.num_layers = get_or<int64_t>(j, "num_layers", 30, source);
    c.eps = get_or<double>(j, "eps", 1e-6, source);
    c.cross_attn_norm = get_or<bool>(j, "cross_attn_norm", true, source);
    // diffusers' default is "rms_norm_across_heads"; an explicit null turns it off.
    c.qk_norm = !j.contains("qk_norm") || !j["qk_norm"].is_null();
    if (j.contains("image_dim") && !j["image_dim"].is_null()) {
      c.kind = DitKind::kI2V;
      c.clip_dim = get_or<int64_t>(j, "image_dim", 1280, source);
      if (j.contains("pos_embed_seq_len") && !j["pos_embed_seq_len"].is_null())
        c.flf_pos_tokens = get_or<int64_t>(j, "pos_embed_seq_len", 0, source);
    } else if (c.in_dim > c.out_dim) {
      c.kind = DitKind::kI2V;  // Wan 2.2 I2V A14B: mask + image latents, no CLIP branch
      c.clip_dim = 0;
    } else if (c.in_dim == 48) {
      c.kind = DitKind::kTI2V;  // Wan 2.2 TI2V-5B: 48-channel latents
    }
  } else {
    const std::string type = get_or<std::string>(j, "model_type", "t2v", source);
    if (type == "t2v")
      c.kind = DitKind::kT2V;
    else if (type == "i2v")
      c.kind = DitKind::kI2V;
    else if (type == "flf2v") {
      c.kind = DitKind::kI2V;
      c.flf_pos_tokens = 2 * 257;  // the checkpoint's table decides (DitCheckpoint::open)
    } else if (type == "ti2v")
      c.kind = DitKind::kTI2V;
    else
      throw_input_error(source, ": unsupported model_type '", type,
                        "' (expected t2v, i2v or ti2v)");
    c.text_len = get_or<int64_t>(j, "text_len", 512, source);
    c.in_dim = get_or<int64_t>(j, "in_dim", 16, source);
    c.dim = get_or<int64_t>(j, "dim", 2048, source);
    c.ffn_dim = get_or<int64_t>(j, "ffn_dim", 8192, source);
    c.freq_dim = get_or<int64_t>(j, "freq_dim", 256, source);
    c.text_dim = get_or<int64_t>(j, "text_dim", 4096, source);
    c.out_dim = get_or<int64_t>(j, "out_dim", 16, source);
    c.num_heads = get_or<int64_t>(j, "num_heads", 16, source);
    c.num_layers = get_or<int64_t>(j, "num_layers", 32, source);
    c.qk_norm = get_or<bool>(j, "qk_norm", true, source);
    c.cross_attn_norm = get_or<bool>(j, "cross_attn_norm", true, source);
    c.eps = get_or<double>(j, "eps", 1e-6, source);
  }
  if (j.contains("patch_size")) {
    const auto& p = j["patch_size"];
    if (!p.is_array() || p.size() != 3 || !p[0].is_number_integer() || !p[1].is_number_integer() ||
        !p[2].is_number_integer())
      throw_input_error(source, ": patch_size must be three integers [t, h, w]");
    for (size_t i = 0; i < 3; ++i) c.patch[i] = p[i].get<int64_t>();
  }
  c.causal = get_or<bool>(j, "causal", false, source);
  if (j.contains("window_size") && j["window_size"].is_array()) {
    for (const auto& w : j["window_size"]) {
      if (!w.is_number_integer() || w.get<int64_t>() != -1)
        throw_input_error(source,
                          ": local attention window_size is not supported (expected [-1, -1])");
    }
  }
  c.validate(source);
  return c;
}

DitConfig infer_dit_config(const ShapeLookup& shape_of, const std::string& source) {
  auto need = [&](const std::string& name, int rank) {
    auto s = shape_of(name);
    if (!s)
      throw_input_error(source, ": cannot infer the Wan DiT config: tensor '", name,
                        "' is missing");
    if (s->rank() != rank)
      throw_input_error(source, ": tensor '", name, "' has shape ", s->str(), ", expected rank ",
                        rank);
    return *s;
  };
  DitConfig c;
  const Shape patch = need("patch_embedding.weight", 5);  // [dim, in_dim, pt, ph, pw]
  c.dim = patch[0];
  c.in_dim = patch[1];
  c.patch = {patch[2], patch[3], patch[4]};
  c.text_dim = need("text_embedding.0.weight", 2)[1];
  c.freq_dim = need("time_embedding.0.weight", 2)[1];
  c.ffn_dim = need("blocks.0.ffn.0.weight", 2)[0];
  c.out_dim = need("head.head.weight", 2)[0] / c.patch_volume();
  int64_t layers = 0;
  while (shape_of("blocks." + std::to_string(layers) + ".self_attn.q.weight")) ++layers;
  c.num_layers = layers;
  // No tensor shape reveals the head count; every published Wan model uses head_dim 128.
  if (c.dim % 128 != 0)
    throw_input_error(source, ": cannot infer the number of attention heads for dim ", c.dim,
                      " (not a multiple of 128); put the model's config.json next to the weights "
                      "or pass --config");
  c.num_heads = c.dim / 128;
  c.qk_norm = shape_of("blocks.0.self_attn.norm_q.weight").has_value();
  c.cross_attn_norm = shape_of("blocks.0.norm3.weight").has_value();
  if (shape_of("img_emb.proj.0.weight")) {
    c.kind = DitKind::kI2V;
    c.clip_dim = need("img_emb.proj.0.weight", 1)[0];
    if (const auto pos = shape_of("img_emb.emb_pos"); pos && pos->numel() % c.clip_dim == 0)
      c.flf_pos_tokens = pos->numel() / c.clip_dim;
  } else if (c.in_dim > c.out_dim) {
    c.kind = DitKind::kI2V;  // Wan 2.2 I2V A14B: mask + image latents, no CLIP branch
    c.clip_dim = 0;
  } else if (c.in_dim == 48) {
    c.kind = DitKind::kTI2V;  // Wan 2.2 TI2V-5B: same tensors as t2v, 48-channel latents
  }
  c.validate(source);
  return c;
}

}  // namespace vidax::wan
