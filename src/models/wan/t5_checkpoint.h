// Opening a umT5 encoder checkpoint as users download it, auto-detected:
//  - official (`models_t5_umt5-xxl-enc-bf16.pth` names: `blocks.N.attn.q.weight`, ...), through
//    TensorSource (safetensors today; `.pth` once TensorSource reads it);
//  - transformers names (`encoder.block.N.layer.0.SelfAttention.q.weight`, `shared.weight`):
//    diffusers' `text_encoder/` folder (sharded through model.safetensors.index.json, with a
//    config.json) and ComfyUI's `umt5_xxl_fp16.safetensors` / `umt5_xxl_fp8_e4m3fn_scaled`
//    (per-tensor `scale_weight`, see comfy_fp8.h), optionally under a common prefix.
// The layouts are declarative rename tables onto the official names of t5_tensors.h; nothing is
// converted on disk. Thread-safe after open (read-only).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "models/wan/dit_checkpoint.h"  // ShapeMismatch
#include "models/wan/t5_config.h"

namespace vidax::wan {

enum class T5Layout { kOfficial, kTransformers };
std::string t5_layout_name(T5Layout layout);

// Official name -> transformers name (without any file prefix); the name itself when no rule
// applies. For the embedding this gives "shared.weight".
std::string t5_official_to_transformers(const std::string& official);

class T5Checkpoint {
 public:
  // `config_override` replaces config.json / metadata / inference when given.
  static T5Checkpoint open(const std::string& path,
                           const std::optional<T5Config>& config_override = std::nullopt);

  const std::string& path() const { return path_; }
  T5Layout layout() const { return layout_; }
  const T5Config& config() const { return config_; }
  const std::string& config_source() const { return config_source_; }
  const TensorSource& source() const { return source_; }

  // Problems found against the declaration (all empty for a loadable checkpoint).
  const std::vector<std::string>& missing() const { return missing_; }        // official names
  const std::vector<std::string>& unexpected() const { return unexpected_; }  // file names
  const std::vector<ShapeMismatch>& shape_mismatches() const { return mismatches_; }
  const std::vector<std::string>& unsupported_dtype() const { return bad_dtype_; }
  // Throws InputError naming the first problems when the checkpoint cannot be loaded.
  void require_loadable() const;

  // The tensor for an official name, as stored (zero-copy) except scaled fp8 (dequantized, F32).
  Tensor get(const std::string& official) const;
  std::string file_name(const std::string& official) const;

  // A weight function over get() for building a T5Encoder; drops the file's pages from the
  // resident set every ~256 MiB handed out (as DitCheckpoint::loader() does, for the same reason).
  std::function<Tensor(const std::string&)> loader() const;

 private:
  std::string path_;
  T5Layout layout_ = T5Layout::kOfficial;
  T5Config config_;
  std::string config_source_;
  TensorSource source_;
  std::map<std::string, std::string> to_file_;  // official -> name in file
  std::vector<std::string> missing_, unexpected_, bad_dtype_;
  std::vector<ShapeMismatch> mismatches_;
};

}  // namespace vidax::wan
