// A disk cache of generated clips (U8 [F, H, W, 3] frames), so that comparing several
// configurations against one reference generates the reference once. An entry is keyed by the
// SHA-256 of the model files' SHA-256s, the canonical configuration, the prompt, the negative
// prompt and the seed (clip_key), and stored as `<dir>/<key>.safetensors` (tensor "frames",
// metadata naming what it holds). Entries are written atomically; a missing, unreadable or
// wrongly shaped entry is a miss.
//
// Not thread-safe; separate processes may share a folder (writes are atomic renames).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "pipeline/model_files.h"

namespace vidax::eval {

// The folder used when --cache is not given: `<source tree>/build/eval-cache` when the binary
// runs from a build folder of a source tree (build/<preset>/vidax), else
// $XDG_CACHE_HOME/vidax/eval, else ~/.cache/vidax/eval.
std::string default_cache_dir();

// One text fingerprinting the four model files (their SHA-256s, cached by
// pipeline/model_hashes.h).
std::string model_fingerprint(const ModelFiles& files);

// Hex SHA-256 naming one clip.
std::string clip_key(const std::string& model_fingerprint, const std::string& canonical_config,
                     const std::string& prompt, const std::string& negative_prompt, uint64_t seed);

class FrameCache {
 public:
  // An empty `dir` disables the cache (every lookup misses, stores do nothing).
  explicit FrameCache(std::string dir);
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // The frames stored under `key` if they have shape `shape` ([F, H, W, 3]).
  std::optional<Tensor> load(const std::string& key, const Shape& shape) const;
  // Creates the folder if needed. InputError naming the folder when it cannot be written.
  void store(const std::string& key, const Tensor& frames,
             const std::map<std::string, std::string>& metadata) const;

 private:
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

}  // namespace vidax::eval
