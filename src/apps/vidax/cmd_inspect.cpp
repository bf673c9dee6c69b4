// `vidax inspect PATH`: what a checkpoint is (layout, model, config), how big, in which dtypes,
// and which tensors are missing or unexpected. Checkpoints that are not a Wan DiT (a T5 or VAE
// .pth, for instance) get a generic summary instead of an error.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <filesystem>

#include "apps/vidax/commands.h"
#include "io/safetensors.h"
#include "models/clip/clip_checkpoint.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/vae_checkpoint.h"
#include "pipeline/model_files.h"

namespace vidax::cli {
namespace {

void print_list(const char* title, const std::vector<std::string>& items) {
  std::printf("%s: %zu\n", title, items.size());
  for (size_t i = 0; i < items.size() && i < 20; ++i) std::printf("  %s\n", items[i].c_str());
  if (items.size() > 20) std::printf("  ... and %zu more\n", items.size() - 20);
}

// Whether DitCheckpoint's layout detection (official, diffusers, ComfyUI) takes the file.
bool looks_like_dit(const TensorSource& src) {
  const CheckpointNames names(src.names());
  const auto& layouts = wan::dit_layouts();
  return std::any_of(layouts.begin(), layouts.end(),
                     [&](const CheckpointLayout& l) { return l.detect(names).has_value(); });
}

void print_tensor_line(const TensorSource& src, const std::string& name) {
  const TensorEntry& e = src.entry(name);
  std::printf("  %-48s %-5s %s\n", name.c_str(), std::string(dtype_name(e.dtype)).c_str(),
              e.shape.str().c_str());
}

constexpr const char* kGenericModelLine = "not a Wan model (generic summary)";

// For checkpoints of other models: what is in the file, without judging it.
void inspect_generic(const std::string& path, const TensorSource& src,
                     const std::string& model_line = kGenericModelLine,
                     const std::vector<std::string>& missing = {},
                     const std::vector<std::string>& unexpected = {}) {
  std::map<std::string, std::pair<int64_t, size_t>> hist;  // dtype -> (params, tensors)
  int64_t params = 0;
  size_t bytes = 0;
  const std::vector<std::string> names = src.names();
  for (const auto& n : names) {
    const auto& e = src.entry(n);
    const int64_t p = e.shape.numel();
    auto& h = hist[std::string(dtype_name(e.dtype))];
    h.first += p;
    h.second += 1;
    params += p;
    bytes += static_cast<size_t>(p) * dtype_size(e.dtype);
  }
  std::printf("file:        %s\n", path.c_str());
  std::printf("format:      %s, %zu file(s)\n", std::string(src.format()).c_str(),
              src.files().size());
  std::printf("model:       %s\n", model_line.c_str());
  std::printf("tensors:     %zu, %lld parameters (%.3f B), %.1f MiB\n", names.size(),
              static_cast<long long>(params), static_cast<double>(params) * 1e-9,
              static_cast<double>(bytes) / (1 << 20));
  std::printf("dtypes:\n");
  for (const auto& [d, v] : hist)
    std::printf("  %-8s %14lld params  %6zu tensors\n", d.c_str(), static_cast<long long>(v.first),
                v.second);
  constexpr size_t kShown = 5;
  std::printf("first tensors (by name):\n");
  for (size_t i = 0; i < names.size() && i < kShown; ++i) print_tensor_line(src, names[i]);
  if (names.size() > kShown) {
    std::printf("last tensors (by name):\n");
    for (size_t i = std::max(kShown, names.size() - kShown); i < names.size(); ++i)
      print_tensor_line(src, names[i]);
  }
  if (model_line != kGenericModelLine) {  // a recognised model: say what the loader thinks
    print_list("missing tensors", missing);
    print_list("unexpected tensors", unexpected);
  }
}

// umT5 encoders, Wan VAEs and CLIP image encoders: the loader's own detection decides;
// InputError means "not one".
bool inspect_component(const std::string& path) {
  try {
    const auto ck = wan::T5Checkpoint::open(path);
    const auto& c = ck.config();
    inspect_generic(
        path, ck.source(),
        str_cat("umT5 text encoder, ", c.num_layers, " layers, dim ", c.dim, ", ", c.num_heads,
                " heads, ffn ", c.dim_ffn, ", vocab ", c.vocab, " (",
                wan::t5_layout_name(ck.layout()), " layout; config: ", ck.config_source(), ")"),
        ck.missing(), ck.unexpected());
    return true;
  } catch (const InputError&) {
  }
  try {
    const auto ck = wan::VaeCheckpoint::open(path);
    const auto& c = ck.config();
    inspect_generic(path, ck.source(),
                    str_cat("Wan ", c.version_name(), " VAE, base width ", c.dim, ", z_dim ",
                            c.z_dim, ", stride ", c.temporal_stride(), "x", c.spatial_stride(), "x",
                            c.spatial_stride(), " (", wan::vae_layout_name(ck.layout()),
                            " layout; config: ", ck.config_source(), ")"),
                    ck.missing(), ck.unexpected());
    return true;
  } catch (const InputError&) {
  }
  if (clip::looks_like_clip_vision(CheckpointNames(TensorSource::open(path).names()))) {
    const auto ck = clip::ClipCheckpoint::open(path);
    const auto& c = ck.config();
    inspect_generic(
        path, ck.source(),
        str_cat("CLIP vision encoder (Wan 2.1 I2V / FLF2V image encoder), ViT ", c.num_layers,
                " layers, width ", c.dim, ", ", c.num_heads, " heads, ffn ", c.ffn_dim, ", ",
                c.image_size, "x", c.image_size, " input in ", c.patch_size, "-pixel patches -> ",
                c.tokens(), " tokens (", clip::clip_layout_name(ck.layout()),
                " layout; config: ", ck.config_source(),
                "; the text tower, post-norm and "
                "projection head are not used)"),
        ck.missing(), ck.unexpected());
    return true;
  }
  return false;
}

std::string dit_summary(const wan::DitCheckpoint& ck) {
  const auto& c = ck.config();
  return str_cat("Wan DiT ", c.kind_name(), ", ", c.num_layers, " layers, dim ", c.dim, ", ",
                 c.num_heads, " heads [", wan::layout_name(ck.layout()), " layout]");
}

// A model folder with two DiT experts (Wan 2.2 A14B): the experts, whether they match, the
// switch, and the other components.
void inspect_expert_folder(const std::string& path) {
  const ModelFiles f = resolve_model_files(path, {}, /*require_all=*/false);
  const auto high = wan::DitCheckpoint::open(f.dit);
  const auto low = wan::DitCheckpoint::open(f.dit_low);
  std::printf("model folder: %s (%s layout)\n", path.c_str(), f.layout.c_str());
  std::printf("model:        two DiT experts (Wan 2.2 A14B form)\n");
  std::printf("high noise:   %s  %s\n", f.dit.c_str(), dit_summary(high).c_str());
  std::printf("low noise:    %s  %s\n", f.dit_low.c_str(), dit_summary(low).c_str());
  if (high.config().to_json() != low.config().to_json())
    std::printf("MISMATCH:     the experts' configs differ: %s vs %s\n",
                high.config().to_json().c_str(), low.config().to_json().c_str());
  const bool i2v = high.config().in_dim > high.config().out_dim;
  if (f.boundary_ratio > 0) {
    std::printf("boundary:     %.3f (model_index.json): the high-noise expert runs t >= %.0f\n",
                f.boundary_ratio, f.boundary_ratio * 1000);
  } else {
    std::printf("boundary:     %.3f (official %s default): the high-noise expert runs t >= %.0f\n",
                i2v ? 0.9 : 0.875, i2v ? "I2V" : "T2V", (i2v ? 0.9 : 0.875) * 1000);
  }
  std::printf("text encoder: %s\n", f.t5.empty() ? "(not found)" : f.t5.c_str());
  std::printf("vae:          %s\n", f.vae.empty() ? "(not found)" : f.vae.c_str());
  std::printf("tokenizer:    %s\n", f.tokenizer.empty() ? "(not found)" : f.tokenizer.c_str());
  if (!f.clip.empty()) std::printf("clip:         %s\n", f.clip.c_str());
  const auto problems = [](const wan::DitCheckpoint& ck) {
    return ck.missing().size() + ck.unexpected().size() + ck.shape_mismatches().size() +
           ck.unsupported_dtype().size();
  };
  std::printf("problems:     high noise %zu, low noise %zu (vidax inspect EXPERT lists them)\n",
              problems(high), problems(low));
}

// Self-Forcing's folder: the causal DiT checkpoint and the base Wan model's components.
void inspect_self_forcing_folder(const std::string& path) {
  const ModelFiles f = resolve_model_files(path, {}, /*require_all=*/false);
  std::printf("model folder: %s (%s layout)\n", path.c_str(), f.layout.c_str());
  if (f.dit.empty()) {
    std::printf("causal DiT:   (not found: expected checkpoints/self_forcing_dmd.pt)\n");
  } else {
    const auto ck = wan::DitCheckpoint::open(f.dit);
    std::printf("causal DiT:   %s  %s\n", f.dit.c_str(), dit_summary(ck).c_str());
    std::printf("rollout:      causal (generate --rollout)\n");
  }
  std::printf("text encoder: %s\n", f.t5.empty() ? "(not found)" : f.t5.c_str());
  std::printf("vae:          %s\n", f.vae.empty() ? "(not found)" : f.vae.c_str());
  std::printf("tokenizer:    %s\n", f.tokenizer.empty() ? "(not found)" : f.tokenizer.c_str());
}

void inspect(const std::string& path) {
  if (has_two_experts(path)) {
    inspect_expert_folder(path);
    return;
  }
  if (std::filesystem::is_directory(std::filesystem::path(path) / "wan_models")) {
    inspect_self_forcing_folder(path);
    return;
  }
  {
    const TensorSource src = TensorSource::open(path);
    if (!looks_like_dit(src)) {
      if (!inspect_component(path)) inspect_generic(path, src);
      return;
    }
  }
  auto ck = wan::DitCheckpoint::open(path);
  const auto& src = ck.source();
  std::map<std::string, std::pair<int64_t, size_t>> hist;  // dtype -> (params, bytes)
  int64_t params = 0;
  size_t bytes = 0;
  for (const auto& n : src.names()) {
    const auto& e = src.entry(n);
    const int64_t p = e.shape.numel();
    auto& h = hist[std::string(dtype_name(e.dtype))];
    h.first += p;
    h.second += e.end - e.begin;
    params += p;
    bytes += e.end - e.begin;
  }
  const auto& c = ck.config();
  std::printf("file:        %s\n", path.c_str());
  std::printf("layout:      %s\n", wan::layout_name(ck.layout()).c_str());
  std::printf("model:       Wan DiT %s, %lld layers, dim %lld, %lld heads x %lld, ffn %lld\n",
              c.kind_name().c_str(), static_cast<long long>(c.num_layers),
              static_cast<long long>(c.dim), static_cast<long long>(c.num_heads),
              static_cast<long long>(c.head_dim()), static_cast<long long>(c.ffn_dim));
  for (const auto& name : wan::dit_preset_names()) {
    auto p = wan::dit_preset(name);
    if (p && p->to_json() == c.to_json()) std::printf("preset:      %s\n", name.c_str());
  }
  if (c.causal)
    std::printf("causal:      yes: trained for autoregressive rollout (generate --rollout)\n");
  std::printf("config:      %s\n", c.to_json().c_str());
  std::printf("config from: %s\n", ck.config_source().c_str());
  std::printf("tensors:     %zu, %lld parameters (%.3f B), %.1f MiB\n", src.names().size(),
              static_cast<long long>(params), static_cast<double>(params) * 1e-9,
              static_cast<double>(bytes) / (1 << 20));
  std::printf("declared:    %lld parameters\n",
              static_cast<long long>(wan::dit_parameter_count(c)));
  std::printf("dtypes:\n");
  for (const auto& [d, v] : hist)
    std::printf("  %-8s %14lld params  %10.1f MiB\n", d.c_str(), static_cast<long long>(v.first),
                static_cast<double>(v.second) / (1 << 20));
  print_list("missing", ck.missing());
  print_list("unexpected", ck.unexpected());
  std::vector<std::string> mism;
  for (const auto& m : ck.shape_mismatches())
    mism.push_back(m.name + ": " + m.actual.str() + ", expected " + m.expected.str());
  print_list("wrong shape", mism);
  print_list("unsupported dtype", ck.unsupported_dtype());
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect",
                                 "Describe a checkpoint: layout, model, config, dtypes, problems");
  auto path = std::make_shared<std::string>();
  cmd->add_option("path", *path,
                  "checkpoint file (.safetensors or PyTorch .pth), *.safetensors.index.json or "
                  "folder")
      ->required();
  cmd->fallthrough();
  cmd->callback([=] { inspect(*path); });
}

}  // namespace vidax::cli
