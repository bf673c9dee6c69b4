#include "pipeline/model_files.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}
bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// Regular files directly in `dir` whose name ends with `suffix`, sorted.
std::vector<fs::path> files_with_suffix(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool contains_ci(std::string text, std::string needle) {
  auto lower = [](std::string& s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  lower(text);
  lower(needle);
  return text.find(needle) != std::string::npos;
}

// The single file in `candidates` (after keeping those whose name contains `prefer`, when any
// does); an error naming `what` and the folder otherwise.
std::string pick_one(std::vector<fs::path> candidates, const std::string& prefer,
                     const fs::path& dir, const std::string& what) {
  if (!prefer.empty()) {
    std::vector<fs::path> preferred;
    for (const auto& c : candidates)
      if (contains_ci(c.filename().string(), prefer)) preferred.push_back(c);
    if (!preferred.empty()) candidates = preferred;
  }
  if (candidates.empty())
    throw_input_error(dir.string(), ": no ", what, " found (expected a .safetensors file)");
  if (candidates.size() > 1) {
    std::string names;
    for (const auto& c : candidates) names += (names.empty() ? "" : ", ") + c.filename().string();
    throw_input_error(dir.string(), ": several ", what, " candidates (", names,
                      "); choose one with the matching --dit/--t5/--vae flag");
  }
  return candidates[0].string();
}

ModelFiles resolve_official(const fs::path& dir) {
  ModelFiles f;
  f.layout = "official";
  if (is_dir(dir / "high_noise_model") || is_dir(dir / "low_noise_model")) {  // Wan 2.2 A14B
    for (const char* sub : {"high_noise_model", "low_noise_model"})
      if (!is_dir(dir / sub))
        throw_input_error(dir.string(), ": a two-expert (Wan 2.2 A14B) folder needs both ",
                          "high_noise_model/ and low_noise_model/; ", sub, "/ is missing");
    f.dit = (dir / "high_noise_model").string();
    f.dit_low = (dir / "low_noise_model").string();
  } else if (is_file(dir / "diffusion_pytorch_model.safetensors.index.json"))
    f.dit = (dir / "diffusion_pytorch_model.safetensors.index.json").string();
  else if (is_file(dir / "diffusion_pytorch_model.safetensors"))
    f.dit = (dir / "diffusion_pytorch_model.safetensors").string();
  for (const char* name :
       {"models_t5_umt5-xxl-enc-bf16.pth", "models_t5_umt5-xxl-enc-bf16.safetensors"})
    if (f.t5.empty() && is_file(dir / name)) f.t5 = (dir / name).string();
  for (const char* name : {"Wan2.1_VAE.pth", "Wan2.2_VAE.pth", "Wan2.1_VAE.safetensors"})
    if (f.vae.empty() && is_file(dir / name)) f.vae = (dir / name).string();
  if (is_file(dir / "google/umt5-xxl/spiece.model"))
    f.tokenizer = (dir / "google/umt5-xxl").string();
  for (const char* name : {"models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth",
                           "models_clip_open-clip-xlm-roberta-large-vit-huge-14.safetensors"})
    if (f.clip.empty() && is_file(dir / name)) f.clip = (dir / name).string();
  return f;
}

// Self-Forcing's folder as its README lays it out: wan_models/Wan2.1-T2V-1.3B/ (the base Wan
// model: umT5, VAE, tokenizer, config) and checkpoints/self_forcing_dmd.pt (all of the causal
// DiT's weights: it replaces the base DiT).
ModelFiles resolve_self_forcing(const fs::path& dir) {
  fs::path base = dir / "wan_models" / "Wan2.1-T2V-1.3B";
  if (!is_dir(base)) {
    std::vector<fs::path> subs;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "wan_models", ec))
      if (e.is_directory(ec)) subs.push_back(e.path());
    if (subs.size() != 1)
      throw_input_error((dir / "wan_models").string(), ": expected Wan2.1-T2V-1.3B/ (the base Wan ",
                        "model of a Self-Forcing folder), found ", subs.size(), " folders");
    base = subs[0];
  }
  ModelFiles f = resolve_official(base);
  f.layout = "self-forcing";
  const fs::path ckpts = dir / "checkpoints";
  if (is_file(ckpts / "self_forcing_dmd.pt")) {
    f.dit = (ckpts / "self_forcing_dmd.pt").string();
  } else if (is_dir(ckpts)) {
    std::vector<fs::path> found = files_with_suffix(ckpts, ".pt");
    for (const auto& p : files_with_suffix(ckpts, ".safetensors")) found.push_back(p);
    f.dit = pick_one(found, "", ckpts, "causal DiT checkpoint (.pt)");
  } else {
    f.dit.clear();  // the base DiT is bidirectional: without a checkpoint there is no causal DiT
  }
  return f;
}

ModelFiles resolve_diffusers(const fs::path& dir) {
  ModelFiles f;
  f.layout = "diffusers";
  if (is_dir(dir / "transformer")) f.dit = (dir / "transformer").string();
  if (is_dir(dir / "transformer_2")) f.dit_low = (dir / "transformer_2").string();
  if (is_file(dir / "model_index.json")) {
    std::ifstream in(dir / "model_index.json");
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw_input_error((dir / "model_index.json").string(), ": not valid JSON (", e.what(), ")");
    }
    if (index.is_object() && index.contains("boundary_ratio") &&
        !index["boundary_ratio"].is_null()) {
      const auto& b = index["boundary_ratio"];
      if (!b.is_number() || !(b.get<double>() > 0 && b.get<double>() < 1))
        throw_input_error((dir / "model_index.json").string(),
                          ": boundary_ratio must be a number in (0, 1), got ", b.dump());
      f.boundary_ratio = b.get<double>();
    }
  }
  if (is_dir(dir / "text_encoder")) f.t5 = (dir / "text_encoder").string();
  if (is_dir(dir / "vae")) f.vae = (dir / "vae").string();
  if (is_dir(dir / "tokenizer")) f.tokenizer = (dir / "tokenizer").string();
  if (is_dir(dir / "image_encoder")) f.clip = (dir / "image_encoder").string();
  return f;
}

// Only the files not given explicitly are looked up, so a flag resolves an ambiguity.
ModelFiles resolve_comfyui(fs::path dir, const ModelFiles& given) {
  if (is_dir(dir / "split_files")) dir /= "split_files";
  ModelFiles f;
  f.layout = "comfyui";
  if (given.dit.empty()) {
    const auto models = files_with_suffix(dir / "diffusion_models", ".safetensors");
    std::vector<fs::path> high, low;
    for (const auto& m : models) {
      if (contains_ci(m.filename().string(), "high_noise")) high.push_back(m);
      if (contains_ci(m.filename().string(), "low_noise")) low.push_back(m);
    }
    if (!high.empty() || !low.empty()) {  // Wan 2.2 A14B: the two experts
      f.dit = pick_one(high, "", dir / "diffusion_models", "high-noise expert (*high_noise*)");
      f.dit_low = pick_one(low, "", dir / "diffusion_models", "low-noise expert (*low_noise*)");
    } else {
      f.dit = pick_one(models, "", dir / "diffusion_models", "diffusion model");
    }
  }
  if (given.t5.empty())
    f.t5 = pick_one(files_with_suffix(dir / "text_encoders", ".safetensors"), "umt5",
                    dir / "text_encoders", "umT5 text encoder");
  if (given.vae.empty())
    f.vae = pick_one(files_with_suffix(dir / "vae", ".safetensors"), "wan", dir / "vae", "VAE");
  if (given.clip.empty()) {
    const auto clips = files_with_suffix(dir / "clip_vision", ".safetensors");
    if (!clips.empty())
      f.clip = pick_one(clips, "clip_vision_h", dir / "clip_vision", "CLIP vision");
  }
  return f;  // ComfyUI ships no spiece.model: --tokenizer is required
}

}  // namespace

bool has_two_experts(const std::string& dir_text) {
  const fs::path dir(dir_text);
  if (!is_dir(dir)) return false;
  if (is_dir(dir / "high_noise_model") || is_dir(dir / "low_noise_model") ||
      is_dir(dir / "transformer_2"))
    return true;
  const fs::path models = is_dir(dir / "split_files") ? dir / "split_files" / "diffusion_models"
                                                      : dir / "diffusion_models";
  for (const auto& m : files_with_suffix(models, ".safetensors"))
    if (contains_ci(m.filename().string(), "high_noise") ||
        contains_ci(m.filename().string(), "low_noise"))
      return true;
  return false;
}

ModelFiles resolve_model_files(const std::string& model_dir, const ModelFiles& explicit_paths,
                               bool require_all) {
  ModelFiles f;
  if (model_dir.empty()) {
    f.layout = "explicit";
  } else {
    const fs::path dir(model_dir);
    if (!is_dir(dir)) throw_input_error("--model: ", model_dir, " is not a folder");
    if (is_file(dir / "model_index.json") || is_dir(dir / "transformer"))
      f = resolve_diffusers(dir);
    else if (is_dir(dir / "wan_models"))
      f = resolve_self_forcing(dir);
    else if (is_dir(dir / "diffusion_models") || is_dir(dir / "split_files"))
      f = resolve_comfyui(dir, explicit_paths);
    else
      f = resolve_official(dir);
  }
  if (!explicit_paths.dit.empty()) {
    f.dit = explicit_paths.dit;
    f.dit_low.clear();  // --dit alone is one model; --dit-low adds the low-noise expert
  }
  if (!explicit_paths.dit_low.empty()) f.dit_low = explicit_paths.dit_low;
  if (!explicit_paths.t5.empty()) f.t5 = explicit_paths.t5;
  if (!explicit_paths.vae.empty()) f.vae = explicit_paths.vae;
  if (!explicit_paths.tokenizer.empty()) f.tokenizer = explicit_paths.tokenizer;
  if (!explicit_paths.clip.empty()) f.clip = explicit_paths.clip;

  const std::string where = model_dir.empty()
                                ? std::string("no --model given")
                                : str_cat("--model ", model_dir, " (", f.layout, " layout)");
  auto need = [&](const std::string& value, const char* flag, const char* what) {
    if (value.empty()) throw_input_error(where, ": no ", what, " found; pass ", flag, " FILE");
  };
  if (!require_all) return f;
  need(f.dit, "--dit", "diffusion transformer");
  need(f.t5, "--t5", "umT5 text encoder");
  need(f.vae, "--vae", "VAE");
  if (f.tokenizer.empty()) {
    if (f.layout == "comfyui")
      throw_input_error(where,
                        ": ComfyUI folders ship no sentencepiece tokenizer; pass "
                        "--tokenizer PATH/spiece.model (from google/umt5-xxl)");
    need(f.tokenizer, "--tokenizer", "tokenizer (spiece.model)");
  }
  return f;
}

}  // namespace vidax
