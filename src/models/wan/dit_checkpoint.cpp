#include "models/wan/dit_checkpoint.h"

#include <fstream>

#include <filesystem>

#include "dist/group.h"
#include "dist/mesh.h"
#include "dist/world.h"

#include "models/wan/dit_tensors.h"

namespace vidax::wan {
namespace {

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
      {"img_emb.emb_pos", "condition_embedder.image_embedder.pos_embed"},
  };
  return table;
}

}  // namespace

const std::vector<CheckpointLayout>& dit_layouts() {
  static const std::vector<CheckpointLayout> table = {
      {static_cast<int>(DitLayout::kSelfForcing),
       "self-forcing",
       [](const CheckpointNames& names) -> std::optional<std::string> {
         for (const char* prefix : {"generator_ema.model.", "generator.model."})
           if (names.any_starts_with(prefix)) return std::string(prefix);
         return std::nullopt;
       },
       {}},
      {static_cast<int>(DitLayout::kComfyUI),
       "comfyui",
       [](const CheckpointNames& names) -> std::optional<std::string> {
         if (names.any_starts_with(kComfyPrefix)) return std::string(kComfyPrefix);
         return std::nullopt;
       },
       {}},
      {static_cast<int>(DitLayout::kDiffusers), "diffusers",
       any_marker(
           {"condition_embedder.time_embedder.linear_1.weight", "blocks.0.attn1.to_q.weight"}),
       [](const std::string& n, const std::string&, const CheckpointNames&) {
         return official_to_diffusers(n);
       }},
      {static_cast<int>(DitLayout::kOfficial),
       "official",
       any_marker({"blocks.0.self_attn.q.weight", "patch_embedding.weight"}),
       {}},
  };
  return table;
}

std::string layout_name(DitLayout layout) {
  return checkpoint_layout_name(dit_layouts(), static_cast<int>(layout));
}

std::string official_to_diffusers(const std::string& official) {
  // Rename only the part after "blocks.N." (or the whole name for top-level tensors), applying
  // the first matching rule: a single rule covers each name.
  std::string prefix, rest = official;
  if (official.starts_with("blocks.")) {
    const size_t dot = official.find('.', 7);
    prefix = official.substr(0, dot + 1);
    rest = official.substr(dot + 1);
  }
  for (const auto& [from, to] : diffusers_renames()) {
    if (rest.starts_with(from) && (rest.size() == from.size() || rest[from.size()] == '.')) {
      if (prefix.empty() && from == "modulation") continue;  // top-level is head.modulation
      return prefix + to + rest.substr(from.size());
    }
  }
  return official;
}

namespace {

// <folder>/checkpoints/X.pt of Self-Forcing's README layout -> <folder>/wan_models/<one
// model>/config.json, when the checkpoint is in that layout and the file exists; else "".
std::string self_forcing_base_config(const DitCheckpoint& ck, const std::string& path) {
  namespace fs = std::filesystem;
  if (ck.layout() != DitLayout::kSelfForcing) return "";
  std::error_code ec;
  const fs::path models = fs::path(path).parent_path().parent_path() / "wan_models";
  const fs::path preferred = models / "Wan2.1-T2V-1.3B" / "config.json";
  if (fs::is_regular_file(preferred, ec)) return preferred.string();
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(models, ec))
    if (fs::is_regular_file(e.path() / "config.json", ec))
      found.push_back(e.path() / "config.json");
  return found.size() == 1 ? found[0].string() : "";
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, ": cannot read");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

DitCheckpoint DitCheckpoint::open(const std::string& path,
                                  const std::optional<DitConfig>& config_override) {
  DitCheckpoint ck;
  static_cast<Checkpoint&>(ck) =
      Checkpoint::open(path, dit_layouts(),
                       "not a Wan DiT checkpoint: expected 'blocks.0.self_attn.q.weight' "
                       "(official), 'blocks.0.attn1.to_q.weight' (diffusers), "
                       "'model.diffusion_model.*' (ComfyUI) or 'generator_ema.model.*' "
                       "(Self-Forcing)");

  // Config: explicit override, then config.json, then the file's metadata, then inference.
  // vidax-written and fixture files keep the official constructor kwargs in the metadata
  // ("source_config" for files converted to diffusers names).
  if (config_override) {
    ck.config_ = *config_override;
    ck.config_source_ = "override";
  } else if (auto text = find_config_text(ck, [](const std::string&) { return true; },
                                          {"config", "source_config"})) {
    const auto& meta = ck.source().metadata();
    if (!text->key.empty() && meta.count("model_type") &&
        text->text.find("model_type") == std::string::npos) {
      // The fixtures keep model_type beside the constructor kwargs.
      text->text.insert(text->text.find('{') + 1,
                        "\"model_type\": \"" + meta.at("model_type") + "\", ");
    }
    ck.config_ = dit_config_from_json(text->text, text->where);
    ck.config_source_ = text->source;
  } else if (const std::string base = self_forcing_base_config(ck, path); !base.empty()) {
    // Self-Forcing's folder: the checkpoint replaces the DiT of the base Wan model beside it,
    // whose config.json describes the network (the head count is not in the shapes).
    ck.config_ = dit_config_from_json(read_text_file(base), base);
    ck.config_source_ = base;
  } else {
    ck.config_ = infer_dit_config([&](const std::string& n) { return ck.layout_shape(n); }, path);
    ck.config_source_ = "inferred from tensor shapes";
  }
  // FLF2V: the image branch's learnt position table fixes how many CLIP tokens it takes (two
  // images x 257 for the real model); the file says how many.
  // The image branch's width is the CLIP encoder's (1280 for ViT-H; config files rarely say).
  // Wan 2.2 I2V A14B is an i2v model (model_type "i2v") without that branch: no img_emb.
  if (ck.config_.kind == DitKind::kI2V) {
    if (const auto ln = ck.layout_shape("img_emb.proj.0.weight"); ln && ln->rank() == 1) {
      ck.config_.clip_dim = (*ln)[0];
    } else if (!ln) {
      ck.config_.clip_dim = 0;
      ck.config_.flf_pos_tokens = 0;
    }
  }
  if (ck.config_.image_branch())
    if (const auto pos = ck.layout_shape("img_emb.emb_pos");
        pos && ck.config_.clip_dim > 0 && pos->numel() % ck.config_.clip_dim == 0)
      ck.config_.flf_pos_tokens = pos->numel() / ck.config_.clip_dim;
  if (ck.layout() == DitLayout::kSelfForcing) ck.config_.causal = true;
  ck.check(dit_tensor_decls(ck.config_), {});
  return ck;
}

void DitCheckpoint::require_loadable() const {
  const std::string model = str_cat(layout_name(layout()), " Wan ", config_.kind_name(), " DiT");
  Checkpoint::require_loadable(
      {" for config " + config_.to_json(), model, model + " with config " + config_.to_json()});
}

std::function<Tensor(const std::string&)> shared_loader(std::shared_ptr<const DitCheckpoint> ck) {
  auto load = ck->loader();
  return
      [ck = std::move(ck), load = std::move(load)](const std::string& name) { return load(name); };
}

void check_keep_fp16(bool keep_fp16, Precision precision) {
  if (keep_fp16 && precision != Precision::kFP32)
    throw_input_error(
        "--keep-fp16 keeps fp16 weights for --precision fp32 (half its memory); with bf16 they "
        "are converted at load to the same size");
}

std::function<std::optional<Fp8Tensor>(const std::string&)> kept_weight_loader(
    std::shared_ptr<const DitCheckpoint> ck, bool fp8, bool fp16) {
  auto load_fp8 = ck->fp8_loader();
  auto load = ck->loader();
  return [ck = std::move(ck), load_fp8 = std::move(load_fp8), load = std::move(load), fp8,
          fp16](const std::string& name) -> std::optional<Fp8Tensor> {
    if (fp8) {
      std::optional<Fp8Tensor> f = load_fp8(name);
      if (f) return f;
    }
    // The stored dtype from the file's own view (zero-copy), before anything is converted.
    if (fp16 && ck->source().tensor(ck->file_name(name)).dtype() == DType::kF16)
      return Fp8Tensor{load(name), 1.0f};  // an F16 tensor is served as stored
    return std::nullopt;
  };
}

std::shared_ptr<dist::Group> weight_shard_group(const ExecContext& ctx) {
  // The group: one CFG branch's sequence-parallel ranks (ring x ulysses) of one tp rank. They
  // hold the same rows of every weight and run the same blocks at every call; CFG branches may
  // not (a step method can skip the blocks of one branch only: MagCache decides per branch), so
  // their gathers could not be matched.
  const int sp = ctx.mesh != nullptr ? ctx.mesh->sp().size() : 1;
  if (sp < 2)
    throw_job_input_error(
        "--weights sharded splits the blocks over the sequence-parallel processes (ring x "
        "ulysses) of each CFG branch and tp rank: run under mpirun with a --mesh where "
        "ring x ulysses is at least 2 (here ",
        sp, ")");
  if (!dist::collectives_from_any_thread())
    throw_job_input_error(
        "--weights sharded needs MPI_THREAD_MULTIPLE, which this Open MPI "
        "did not grant");
  // Its own communicator: the block loader's thread gathers on it while the main thread runs
  // the sequence-parallel collectives on sp().
  return ctx.mesh->sp().split(0, ctx.mesh->sp().rank(), "weights");
}

WanDit open_dit(const std::shared_ptr<const DitCheckpoint>& ck, Precision precision,
                const ExecContext& ctx, int64_t weights_budget, bool keep_fp8, bool sharded,
                bool keep_fp16) {
  check_keep_fp16(keep_fp16, precision);
  WeightResidency residency;
  residency.budget_bytes = weights_budget;
  if (keep_fp8 || keep_fp16) residency.fp8 = kept_weight_loader(ck, keep_fp8, keep_fp16);
  if (sharded) residency.shard_group = weight_shard_group(ctx);
  // Streamed blocks are read again at every forward: their loader keeps the checkpoint open.
  const WeightFn weights = weights_budget > 0 ? shared_loader(ck) : ck->loader();
  WanDit dit(ck->config(), weights, precision, ctx, residency);
  ck->source().release_resident_pages();  // the packed copies are what the model reads now
  return dit;
}

}  // namespace vidax::wan
