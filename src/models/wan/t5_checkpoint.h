// Opening a umT5 encoder checkpoint as users download it, auto-detected:
//  - official (`models_t5_umt5-xxl-enc-bf16.pth` names: `blocks.N.attn.q.weight`, ...), through
//    TensorSource (safetensors today; `.pth` once TensorSource reads it);
//  - transformers names (`encoder.block.N.layer.0.SelfAttention.q.weight`, `shared.weight`):
//    diffusers' `text_encoder/` folder (sharded through model.safetensors.index.json, with a
//    config.json) and ComfyUI's `umt5_xxl_fp16.safetensors` / `umt5_xxl_fp8_e4m3fn_scaled`
//    (per-tensor `scale_weight`, see comfy_fp8.h), optionally under a common prefix.
// The layouts are declarative rename tables onto the official names of t5_tensors.h, applied by
// the generic Checkpoint (io/checkpoint.h); nothing is converted on disk. Thread-safe after open
// (read-only).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"  // Tensor, TensorSource
#include "models/wan/t5_config.h"

namespace vidax::wan {

enum class T5Layout { kOfficial, kTransformers };
std::string t5_layout_name(T5Layout layout);

// Official name -> transformers name (without any file prefix); the name itself when no rule
// applies. For the embedding this gives "shared.weight".
std::string t5_official_to_transformers(const std::string& official);

// The encoder's layouts in detection order (official, transformers); ids are T5Layout values.
const std::vector<CheckpointLayout>& t5_layouts();

// The generic Checkpoint with the encoder's layouts, declaration and config.
class T5Checkpoint : private Checkpoint {
 public:
  // `config_override` replaces config.json / metadata / inference when given.
  static T5Checkpoint open(const std::string& path,
                           const std::optional<T5Config>& config_override = std::nullopt);

  T5Layout layout() const { return static_cast<T5Layout>(layout_id()); }
  const T5Config& config() const { return config_; }
  const std::string& config_source() const { return config_source_; }
  // Throws InputError naming the first problems when the checkpoint cannot be loaded.
  void require_loadable() const;

  using Checkpoint::file_name, Checkpoint::get, Checkpoint::loader, Checkpoint::missing,
      Checkpoint::path, Checkpoint::shape_mismatches, Checkpoint::source, Checkpoint::unexpected,
      Checkpoint::unsupported_dtype;

 private:
  T5Config config_;
  std::string config_source_;
};

}  // namespace vidax::wan
