// Opening a Wan DiT checkpoint as users download it: the official layout
// (`blocks.N.self_attn.q.weight`), the diffusers layout (`blocks.N.attn1.to_q.weight`, with the
// norm2/norm3 swap and `scale_shift_table`s) and ComfyUI's repackaged files (official names
// under `model.diffusion_model.`), auto-detected. Single files, sharded index files or folders.
//
// The layouts are declarative rename tables onto the official names declared in dit_tensors.h;
// nothing is converted on disk. Thread-safe after open (read-only).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "models/wan/dit_config.h"

namespace vidax::wan {

enum class DitLayout { kOfficial, kDiffusers, kComfyUI };
std::string layout_name(DitLayout layout);

// Official name -> diffusers name (the conversion script's rename table, applied in order).
std::string official_to_diffusers(const std::string& official);

struct ShapeMismatch {
  std::string name;  // file name of the tensor
  Shape expected, actual;
};

class DitCheckpoint {
 public:
  // `config_override` replaces config.json / metadata / inference when given.
  static DitCheckpoint open(const std::string& path,
                            const std::optional<DitConfig>& config_override = std::nullopt);

  const std::string& path() const { return path_; }
  DitLayout layout() const { return layout_; }
  const DitConfig& config() const { return config_; }
  const std::string& config_source() const { return config_source_; }
  const TensorSource& source() const { return source_; }

  // Problems found against the declaration (all empty for a loadable checkpoint).
  const std::vector<std::string>& missing() const { return missing_; }        // official names
  const std::vector<std::string>& unexpected() const { return unexpected_; }  // file names
  const std::vector<ShapeMismatch>& shape_mismatches() const { return mismatches_; }
  const std::vector<std::string>& unsupported_dtype() const { return bad_dtype_; }
  // Throws InputError naming the first problems when the checkpoint cannot be loaded.
  void require_loadable() const;

  // The tensor for an official name, as stored (zero-copy) except fp8 tensors carrying a
  // ComfyUI `scale_weight`, which are dequantized to F32 here.
  Tensor get(const std::string& official) const;
  std::string file_name(const std::string& official) const;

  // A WeightFn over get() for building a WanDit. Every ~256 MiB handed out it drops the
  // file's pages from the resident set: the model packs each weight into its own memory, so
  // without this peak RSS would count the weights twice (mapping + packed copy). Dropping is
  // safe at any time: a read-only mapping faults the pages back in from the page cache.
  std::function<Tensor(const std::string&)> loader() const;

 private:
  std::string path_;
  DitLayout layout_ = DitLayout::kOfficial;
  DitConfig config_;
  std::string config_source_;
  TensorSource source_;
  std::map<std::string, std::string> to_file_;  // official -> name in file
  std::vector<std::string> missing_, unexpected_, bad_dtype_;
  std::vector<ShapeMismatch> mismatches_;
};

}  // namespace vidax::wan
