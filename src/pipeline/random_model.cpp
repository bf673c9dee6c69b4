#include "pipeline/random_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "models/clip/clip_checkpoint.h"
#include "models/clip/clip_random.h"
#include "models/clip/clip_tensors.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_random.h"
#include "models/wan/t5_tensors.h"
#include "models/wan/vae_checkpoint.h"
#include "models/wan/vae_random.h"
#include "models/wan/vae_tensors.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Named = std::vector<std::pair<std::string, Tensor>>;

template <typename Decls, typename Rename>
Named materialize(const Decls& decls, const wan::WeightFn& weights, const Rename& rename) {
  Named out;
  for (const auto& d : decls) out.emplace_back(rename(d.name), weights(d.name));
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw_input_error(path.string(), ": cannot write");
}

void copy_tokenizer(const std::string& spiece, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::copy_file(spiece, dir / "spiece.model", fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw_input_error(spiece, ": cannot copy the tokenizer to ", dir.string(), ": ", ec.message());
}

json diffusers_dit_config(const wan::DitConfig& c) {
  json j = {{"_class_name", "WanTransformer3DModel"},
            {"_diffusers_version", "0.33.0"},
            {"patch_size", {c.patch[0], c.patch[1], c.patch[2]}},
            {"num_attention_heads", c.num_heads},
            {"attention_head_dim", c.head_dim()},
            {"in_channels", c.in_dim},
            {"out_channels", c.out_dim},
            {"text_dim", c.text_dim},
            {"freq_dim", c.freq_dim},
            {"ffn_dim", c.ffn_dim},
            {"num_layers", c.num_layers},
            {"cross_attn_norm", c.cross_attn_norm},
            {"qk_norm", "rms_norm_across_heads"},
            {"eps", c.eps},
            {"rope_max_seq_len", 1024},
            {"image_dim", c.image_branch() ? json(c.clip_dim) : json()},
            {"added_kv_proj_dim", c.image_branch() ? json(c.dim) : json()},
            {"pos_embed_seq_len", c.flf_pos_tokens > 0 ? json(c.flf_pos_tokens) : json()}};
  if (c.causal) j["causal"] = true;  // vidax's mark of a causal DiT (models/wan/dit_config.h)
  return j;
}

// transformers CLIPVisionConfig (diffusers' image_encoder/config.json).
json transformers_clip_config(const clip::ClipVisionConfig& c) {
  return {{"architectures", {"CLIPVisionModelWithProjection"}},
          {"model_type", "clip_vision_model"},
          {"hidden_size", c.dim},
          {"intermediate_size", c.ffn_dim},
          {"num_attention_heads", c.num_heads},
          {"num_hidden_layers", c.num_layers},
          {"image_size", c.image_size},
          {"patch_size", c.patch_size},
          {"hidden_act", "gelu"},
          {"layer_norm_eps", c.eps},
          {"projection_dim", c.dim}};
}

// The vision tower under transformers names, as diffusers' image_encoder/ and ComfyUI's
// clip_vision_h store it: q/k/v split, the class embedding [dim] and position table [N, dim],
// plus the parts a real file has that the encoder does not use (post_layernorm, position_ids).
Named transformers_clip_tensors(const clip::ClipVisionConfig& c, const wan::WeightFn& fused,
                                DType dtype) {
  const wan::WeightFn split = clip::split_qkv_weights(c, fused);
  Named out;
  for (const TensorDecl& d : clip::clip_vision_tensor_decls(c, clip::QkvStorage::kSeparate)) {
    Tensor t = split(d.name).to(dtype);
    if (d.name == "visual.cls_embedding") t = t.reshape(Shape{c.dim});
    if (d.name == "visual.pos_embedding") t = t.reshape(Shape{c.tokens(), c.dim});
    out.emplace_back(clip::clip_official_to_transformers(d.name), t);
  }
  const std::vector<float> ones(static_cast<size_t>(c.dim), 1.0f);
  out.emplace_back("vision_model.post_layernorm.weight",
                   Tensor::from_floats(ones, Shape{c.dim}).to(dtype));
  out.emplace_back("vision_model.post_layernorm.bias", Tensor::zeros(Shape{c.dim}, dtype));
  Tensor ids = Tensor::zeros(Shape{1, c.tokens()}, DType::kI64);
  for (int64_t i = 0; i < c.tokens(); ++i) ids.mutable_data<int64_t>()[i] = i;
  out.emplace_back("vision_model.embeddings.position_ids", ids);
  return out;
}

json transformers_t5_config(const wan::T5Config& c) {
  return {{"architectures", {"UMT5EncoderModel"}},
          {"model_type", "umt5"},
          {"d_model", c.dim},
          {"d_kv", c.head_dim()},
          {"d_ff", c.dim_ffn},
          {"num_heads", c.num_heads},
          {"num_layers", c.num_layers},
          {"vocab_size", c.vocab},
          {"relative_attention_num_buckets", c.num_buckets},
          {"relative_attention_max_distance", 128},
          {"feed_forward_proj", "gated-gelu"},
          {"layer_norm_epsilon", 1e-6}};
}

json diffusers_vae_config(const wan::VaeConfig& c) {
  return {
      {"_class_name", "AutoencoderKLWan"},
      {"base_dim", c.dim},
      {"z_dim", c.z_dim},
      {"dim_mult", c.dim_mult},
      {"num_res_blocks", c.num_res_blocks},
      {"attn_scales", json::array()},
      {"temperal_downsample", c.temporal_downsample},
      {"latents_mean", c.latent_mean},
      {"latents_std", c.latent_std},
      // Wan 2.2's VAE (AutoencoderKLWan with is_residual): 2x2 pixel patches, own decoder width.
      {"is_residual", c.version == wan::VaeVersion::kWan22},
      {"decoder_base_dim", c.dec_dim},
      {"in_channels", c.version == wan::VaeVersion::kWan22 ? 12 : 3},
      {"out_channels", c.version == wan::VaeVersion::kWan22 ? 12 : 3},
      {"patch_size", c.version == wan::VaeVersion::kWan22 ? json(2) : json()},
      {"scale_factor_spatial", c.spatial_stride()},
      {"scale_factor_temporal", c.temporal_stride()}};
}

}  // namespace

const std::vector<std::string>& random_model_kinds() {
  static const std::vector<std::string> kinds = {"t2v", "i2v", "flf2v", "ti2v"};
  return kinds;
}

RandomModelSpec tiny_random_model_spec(int64_t vocab, const std::string& kind, bool experts) {
  const auto& kinds = random_model_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    throw_input_error("--model: expected t2v, i2v, flf2v or ti2v, got '", kind, "'");
  if (experts && kind != "t2v" && kind != "i2v")
    throw_input_error("--experts: two experts exist for t2v and i2v (Wan 2.2 A14B), not ", kind);
  RandomModelSpec s;
  s.experts = experts;
  s.t5.vocab = vocab;
  s.t5.dim = 64;
  s.t5.dim_attn = 64;
  s.t5.dim_ffn = 128;
  s.t5.num_heads = 4;
  s.t5.num_layers = 2;
  s.dit.dim = 128;
  s.dit.ffn_dim = 256;
  s.dit.num_heads = 1;  // head_dim 128 as every Wan model (the RoPE split assumes it)
  s.dit.num_layers = 2;
  s.dit.text_dim = s.t5.dim;
  s.dit.freq_dim = 256;
  s.vae = *wan::vae_preset("wan2.1-vae");
  s.vae.dim = 8;
  s.vae.dec_dim = 8;
  if (kind == "ti2v") {  // Wan 2.2 TI2V-5B: the 48-channel, stride-16 Wan 2.2 VAE
    s.vae = *wan::vae_preset("wan2.2-vae");
    s.vae.dim = 8;
    s.vae.dec_dim = 16;
    s.dit.kind = wan::DitKind::kTI2V;
    s.dit.in_dim = s.dit.out_dim = s.vae.z_dim;
  } else if (kind == "i2v" || kind == "flf2v") {
    // Noise, 4 mask channels and the image latents in; Wan 2.1 adds the CLIP image branch,
    // Wan 2.2 I2V A14B (two experts) has none.
    s.dit.kind = wan::DitKind::kI2V;
    s.dit.in_dim = 2 * s.vae.z_dim + 4;
    if (experts) {
      s.dit.clip_dim = 0;
    } else {
      clip::ClipVisionConfig c;
      c.image_size = 56, c.patch_size = 14, c.dim = 128, c.ffn_dim = 512, c.num_heads = 2;
      c.num_layers = 3;
      s.clip = c;
      s.dit.clip_dim = c.dim;
      if (kind == "flf2v") s.dit.flf_pos_tokens = 2 * c.tokens();
    }
  }
  return s;
}

void write_random_model(const std::string& dir_text, const std::string& layout,
                        const RandomModelSpec& spec, const std::string& spiece_model) {
  if (layout != "official" && layout != "diffusers" && layout != "comfyui" &&
      layout != "self-forcing")
    throw_input_error("--layout: expected official, diffusers, comfyui or self-forcing, got '",
                      layout, "'");
  if (spec.dit.causal && layout == "comfyui")
    throw_input_error("--causal: ComfyUI folders carry no DiT config to mark it causal; use ",
                      "--layout self-forcing, official or diffusers");
  const fs::path dir(dir_text);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_input_error(dir_text, ": cannot create folder: ", ec.message());
  if (layout == "self-forcing") {
    // Self-Forcing's README layout: the base Wan model (bidirectional DiT) in
    // wan_models/Wan2.1-T2V-1.3B/, and the causal DiT (other weights) as a training checkpoint's
    // generator_ema.model.* in checkpoints/self_forcing_dmd.pt.
    if (spec.experts || spec.clip || spec.dit.kind != wan::DitKind::kT2V)
      throw_input_error("--layout self-forcing: a text-to-video model only");
    RandomModelSpec base = spec;
    base.dit.causal = false;
    write_random_model((dir / "wan_models" / "Wan2.1-T2V-1.3B").string(), "official", base,
                       spiece_model);
    wan::DitConfig causal = spec.dit;
    causal.causal = true;
    const auto w = wan::random_dit_weights(causal, DType::kF32, spec.seed + 7);
    fs::create_directories(dir / "checkpoints", ec);
    write_torch_checkpoint((dir / "checkpoints" / "self_forcing_dmd.pt").string(),
                           materialize(wan::dit_tensor_decls(causal), w, [](const std::string& n) {
                             return "generator_ema.model." + n;
                           }));
    return;
  }

  const auto dit_w = wan::random_dit_weights(spec.dit, DType::kF32, spec.seed);
  const auto dit_low_w = wan::random_dit_weights(spec.dit, DType::kF32, spec.seed + 3);
  const auto t5_w = wan::random_t5_weights(spec.t5, DType::kBF16, spec.seed + 1);
  const auto vae_w = wan::random_vae_weights(spec.vae, DType::kF32, spec.seed + 2);
  const auto dit_decls = wan::dit_tensor_decls(spec.dit);
  const auto t5_decls = wan::t5_tensor_decls(spec.t5);
  const auto vae_decls = wan::vae_tensor_decls(spec.vae);
  auto same = [](const std::string& n) { return n; };
  const bool wan22_vae = spec.vae.version == wan::VaeVersion::kWan22;
  const wan::WeightFn clip_w =
      spec.clip ? clip::random_clip_weights(*spec.clip, DType::kF32, spec.seed + 4) : nullptr;
  const std::string kind = spec.dit.kind_name();  // t2v, i2v, flf2v, ti2v

  if (layout == "official") {
    // Wan-AI/Wan2.1-T2V-*: DiT safetensors + config.json, T5 and VAE as torch .pth files;
    // Wan-AI/Wan2.2-T2V-A14B: the experts in high_noise_model/ and low_noise_model/.
    if (spec.experts) {
      for (const auto& [sub, w] :
           {std::pair{"high_noise_model", &dit_w}, std::pair{"low_noise_model", &dit_low_w}}) {
        fs::create_directories(dir / sub, ec);
        write_safetensors((dir / sub / "diffusion_pytorch_model.safetensors").string(),
                          materialize(dit_decls, *w, same));
        write_text(dir / sub / "config.json", spec.dit.to_json());
      }
    } else {
      write_safetensors((dir / "diffusion_pytorch_model.safetensors").string(),
                        materialize(dit_decls, dit_w, same));
      write_text(dir / "config.json", spec.dit.to_json());
    }
    write_torch_checkpoint((dir / "models_t5_umt5-xxl-enc-bf16.pth").string(),
                           materialize(t5_decls, t5_w, same));
    write_torch_checkpoint((dir / (wan22_vae ? "Wan2.2_VAE.pth" : "Wan2.1_VAE.pth")).string(),
                           materialize(vae_decls, vae_w, same));
    copy_tokenizer(spiece_model, dir / "google" / "umt5-xxl");
    if (spec.clip)  // the official file holds the whole XLM-R CLIP; vidax reads visual.* only
      write_torch_checkpoint(
          (dir / "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth").string(),
          materialize(clip::clip_vision_tensor_decls(*spec.clip), clip_w, same));
  } else if (layout == "diffusers") {
    for (const char* sub : {"transformer", "text_encoder", "vae"})
      fs::create_directories(dir / sub, ec);
    write_safetensors((dir / "transformer" / "diffusion_pytorch_model.safetensors").string(),
                      materialize(dit_decls, dit_w, wan::official_to_diffusers));
    write_text(dir / "transformer" / "config.json", diffusers_dit_config(spec.dit).dump(2));
    if (spec.experts) {  // transformer/ is the high-noise expert, transformer_2/ the low
      fs::create_directories(dir / "transformer_2", ec);
      write_safetensors((dir / "transformer_2" / "diffusion_pytorch_model.safetensors").string(),
                        materialize(dit_decls, dit_low_w, wan::official_to_diffusers));
      write_text(dir / "transformer_2" / "config.json", diffusers_dit_config(spec.dit).dump(2));
    }
    write_safetensors((dir / "text_encoder" / "model.safetensors").string(),
                      materialize(t5_decls, t5_w, wan::t5_official_to_transformers));
    write_text(dir / "text_encoder" / "config.json", transformers_t5_config(spec.t5).dump(2));
    write_safetensors((dir / "vae" / "diffusion_pytorch_model.safetensors").string(),
                      materialize(vae_decls, vae_w, [&](const std::string& n) {
                        return wan::vae_official_to_diffusers(n, spec.vae);
                      }));
    write_text(dir / "vae" / "config.json", diffusers_vae_config(spec.vae).dump(2));
    copy_tokenizer(spiece_model, dir / "tokenizer");
    const bool image = kind != "t2v" && kind != "ti2v";
    json index = {{"_class_name", image ? "WanImageToVideoPipeline" : "WanPipeline"},
                  {"transformer", {"diffusers", "WanTransformer3DModel"}}};
    if (spec.experts) {
      index["transformer_2"] = {"diffusers", "WanTransformer3DModel"};
      index["boundary_ratio"] = image ? 0.9 : 0.875;
    }
    if (spec.clip) {
      fs::create_directories(dir / "image_encoder", ec);
      write_safetensors((dir / "image_encoder" / "model.safetensors").string(),
                        transformers_clip_tensors(*spec.clip, clip_w, DType::kF32));
      write_text(dir / "image_encoder" / "config.json",
                 transformers_clip_config(*spec.clip).dump(2));
      index["image_encoder"] = {"transformers", "CLIPVisionModel"};
    }
    write_text(dir / "model_index.json", index.dump(2));
  } else {
    // ComfyUI split_files: prefixed bf16 DiT, fp16 text encoder (transformers names), VAE.
    for (const char* sub : {"diffusion_models", "text_encoders", "vae"})
      fs::create_directories(dir / sub, ec);
    auto comfy_dit = [&](const wan::WeightFn& w, const std::string& file) {
      Named dit = materialize(dit_decls, w,
                              [](const std::string& n) { return "model.diffusion_model." + n; });
      for (auto& [name, t] : dit) t = t.to(DType::kBF16);
      write_safetensors((dir / "diffusion_models" / file).string(), dit);
    };
    if (spec.experts) {
      comfy_dit(dit_w, "wan2.2_" + kind + "_high_noise_tiny_bf16.safetensors");
      comfy_dit(dit_low_w, "wan2.2_" + kind + "_low_noise_tiny_bf16.safetensors");
    } else {
      comfy_dit(dit_w, (wan22_vae ? "wan2.2_" : "wan2.1_") + kind + "_tiny_bf16.safetensors");
    }
    if (spec.clip) {  // ComfyUI's clip_vision_h.safetensors: transformers names, fp16
      fs::create_directories(dir / "clip_vision", ec);
      write_safetensors((dir / "clip_vision" / "clip_vision_h_tiny.safetensors").string(),
                        transformers_clip_tensors(*spec.clip, clip_w, DType::kF16));
    }
    Named t5 = materialize(t5_decls, t5_w, wan::t5_official_to_transformers);
    for (auto& [name, t] : t5) t = t.to(DType::kF16);
    write_safetensors((dir / "text_encoders" / "umt5_tiny_fp16.safetensors").string(), t5);
    write_safetensors(
        (dir / "vae" / (wan22_vae ? "wan2.2_vae_tiny.safetensors" : "wan_2.1_vae_tiny.safetensors"))
            .string(),
        materialize(vae_decls, vae_w, same));
  }
}

void write_full_size_random_model(const std::string& dir_text, const std::string& preset,
                                  const std::string& spiece_model, bool experts, uint64_t seed) {
  const std::optional<wan::DitConfig> dit = wan::dit_preset(preset);
  if (!dit) {
    std::string names;
    for (const auto& n : wan::dit_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw_input_error("--preset: unknown model '", preset, "' (expected one of ", names, ")");
  }
  if (dit->kind != wan::DitKind::kT2V)
    throw_input_error("--preset ", preset, ": only text-to-video presets are written");
  const wan::T5Config t5 = *wan::t5_preset("umt5-xxl");
  const wan::VaeConfig vae = *wan::vae_preset("wan2.1-vae");
  const fs::path dir(dir_text);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_input_error(dir_text, ": cannot create folder: ", ec.message());
  auto lazy = [](const std::vector<TensorDecl>& decls, const wan::WeightFn& w, DType dtype) {
    std::vector<LazyTensor> out;
    out.reserve(decls.size());
    for (const TensorDecl& d : decls)
      out.push_back({d.name, d.shape, dtype, [w, name = d.name, dtype] {
                       const Tensor t = w(name);
                       return t.dtype() == dtype ? t : t.to(dtype);
                     }});
    return out;
  };
  auto write_dit = [&](const fs::path& sub, uint64_t dit_seed) {
    fs::create_directories(sub, ec);
    wan::write_random_dit_checkpoint((sub / "diffusion_pytorch_model.safetensors").string(), *dit,
                                     DType::kBF16, dit_seed);
    write_text(sub / "config.json", dit->to_json());
  };
  if (experts) {
    write_dit(dir / "high_noise_model", seed);
    write_dit(dir / "low_noise_model", seed + 3);
  } else {
    write_dit(dir, seed);
  }
  write_safetensors_lazy((dir / "models_t5_umt5-xxl-enc-bf16.safetensors").string(),
                         lazy(wan::t5_tensor_decls(t5),
                              wan::random_t5_weights(t5, DType::kBF16, seed + 1), DType::kBF16));
  write_safetensors_lazy((dir / "Wan2.1_VAE.safetensors").string(),
                         lazy(wan::vae_tensor_decls(vae),
                              wan::random_vae_weights(vae, DType::kF32, seed + 2), DType::kF32));
  copy_tokenizer(spiece_model, dir / "google" / "umt5-xxl");
}

}  // namespace vidax
