// Opening a Wan DiT checkpoint as users download it: the official layout
// (`blocks.N.self_attn.q.weight`), the diffusers layout (`blocks.N.attn1.to_q.weight`, with the
// norm2/norm3 swap and `scale_shift_table`s) and ComfyUI's repackaged files (official names
// under `model.diffusion_model.`), auto-detected. Single files, sharded index files or folders.
//
// The layouts are declarative rename tables onto the official names declared in dit_tensors.h,
// applied by the generic Checkpoint (io/checkpoint.h); nothing is converted on disk. Thread-safe
// after open (read-only).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"  // Tensor, TensorSource
#include "models/wan/dit.h"
#include "models/wan/dit_config.h"

namespace vidax::wan {

// kSelfForcing: official names under `generator_ema.model.` (or `generator.model.`), the
// state dicts of a Self-Forcing / CausVid training checkpoint (`self_forcing_dmd.pt`); the EMA
// weights are taken when the file holds both. Such a DiT is causal (DitConfig::causal).
enum class DitLayout { kOfficial, kDiffusers, kComfyUI, kSelfForcing };
std::string layout_name(DitLayout layout);

// Official name -> diffusers name (the conversion script's rename table, applied in order).
std::string official_to_diffusers(const std::string& official);

// The DiT's layouts in detection order (ComfyUI, diffusers, official); ids are DitLayout values.
const std::vector<CheckpointLayout>& dit_layouts();

using vidax::ShapeMismatch;

// The generic Checkpoint with the DiT's layouts, declaration and config.
class DitCheckpoint : private Checkpoint {
 public:
  // `config_override` replaces config.json / metadata / inference when given.
  static DitCheckpoint open(const std::string& path,
                            const std::optional<DitConfig>& config_override = std::nullopt);

  DitLayout layout() const { return static_cast<DitLayout>(layout_id()); }
  const DitConfig& config() const { return config_; }
  const std::string& config_source() const { return config_source_; }
  // Throws InputError naming the first problems when the checkpoint cannot be loaded.
  void require_loadable() const;

  using Checkpoint::file_name, Checkpoint::get, Checkpoint::get_fp8, Checkpoint::fp8_loader,
      Checkpoint::loader, Checkpoint::missing, Checkpoint::path, Checkpoint::shape_mismatches,
      Checkpoint::source, Checkpoint::unexpected, Checkpoint::unsupported_dtype;

 private:
  DitConfig config_;
  std::string config_source_;
};

// A weight function that keeps `ck` open for as long as the function exists: what a model whose
// blocks are streamed (WeightResidency in dit.h) needs, as it reads them again at every forward.
std::function<Tensor(const std::string&)> shared_loader(std::shared_ptr<const DitCheckpoint> ck);

// The weights a model keeps as stored (WeightResidency::fp8), keeping `ck` open: with `fp8` the
// codes and scale of a weight stored as fp8, with `fp16` a weight stored as fp16 (scale 1);
// nullopt for any other.
std::function<std::optional<Fp8Tensor>(const std::string&)> kept_weight_loader(
    std::shared_ptr<const DitCheckpoint> ck, bool fp8, bool fp16 = false);

// InputError when --keep-fp16 is asked with a precision other than fp32 (bf16 holds fp16 weights
// at the same size): every command checks it before loading anything.
void check_keep_fp16(bool keep_fp16, Precision precision);

// The DiT of `ck` under `ctx` (its tp shard under a mesh): all weights resident, or with
// `weights_budget` > 0 the blocks beyond it streamed from `ck` (kept open by the model), with
// `keep_fp8` fp8 weights kept fp8 and with `keep_fp16` (fp32 precision only: InputError with
// bf16, which holds fp16 weights at the same size) fp16 weights kept fp16 (dit.h
// WeightResidency). The one way commands build a DiT from a checkpoint.
// The group a sharded DiT splits its blocks over (WeightResidency::shard_group): a new
// communicator over the mesh's sp() group (one CFG branch's ring x ulysses ranks of one tp rank).
// Collective over sp(). JobInputError when sp() has one rank, or without MPI_THREAD_MULTIPLE.
std::shared_ptr<dist::Group> weight_shard_group(const ExecContext& ctx);

// `sharded` (`--weights sharded`, needs a mesh): the blocks are split over the ranks that hold the
// same tensor-parallel shard (WeightResidency::shard_group; a group made here, collectively).
WanDit open_dit(const std::shared_ptr<const DitCheckpoint>& ck, Precision precision,
                const ExecContext& ctx, int64_t weights_budget, bool keep_fp8, bool sharded = false,
                bool keep_fp16 = false);

}  // namespace vidax::wan
