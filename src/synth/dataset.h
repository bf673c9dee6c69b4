// Synthetic video datasets on disk, the format the vidax-tiny training code reads
// (docs/synthetic-world.md has the full description):
//   DIR/manifest.json             format and generator versions, geometry, shards, one entry per
//                                 clip (index, seed, caption, attributes, geometry, checksum)
//   DIR/clips-00000.safetensors   "clips" U8 [n, F, H, W, 3] RGB and "seeds" I64 [n]
//   DIR/preview.png               optional: a few clips (rows) x 5 frames (columns)
// Clip i has seed `seed + i`; its caption, attributes and pixels are functions of that seed and
// the geometry alone. Every file is written to a temporary name and renamed when complete, the
// manifest last, so a folder with a manifest is a complete dataset.
//
// write_dataset is safe to call concurrently for different folders; SynthDataset is immutable
// after open() (concurrent reads are safe).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "synth/render.h"
#include "synth/synth_world.h"

namespace vidax::synth {

inline constexpr int kDatasetFormatVersion = 1;

struct DatasetOptions {
  std::string out_dir;
  int64_t count = 0;
  uint64_t seed = 0;
  ClipGeometry geometry = kTinyGeometry;
  int64_t shard_size = 64;  // clips per shard file (64 x 256x256x17 RGB = 213 MiB)
  int64_t preview = 0;      // clips shown in preview.png; 0: none
  Layout layout = Layout::kRandom;
};

struct DatasetSummary {
  int64_t clips = 0;
  std::vector<std::string> files;  // written, relative to out_dir, manifest last
};

// InputError naming the flag-like option (--count, --size, --frames, --shard-size, --preview,
// --out) when an option is out of range or the folder cannot be created or written. `progress`
// (optional) is called with the number of clips done after each shard.
DatasetSummary write_dataset(const DatasetOptions& options,
                             const std::function<void(int64_t done)>& progress = {});

// Reads a dataset back (tests, evaluation).
class SynthDataset {
 public:
  static SynthDataset open(const std::string& dir);  // InputError naming the file on any problem

  int64_t size() const { return static_cast<int64_t>(seeds_.size()); }
  const ClipGeometry& geometry() const { return geometry_; }
  Layout layout() const { return layout_; }  // manifests without "layout" are random
  uint64_t seed(int64_t index) const { return seeds_.at(static_cast<size_t>(index)); }
  const std::string& caption(int64_t index) const {
    return captions_.at(static_cast<size_t>(index));
  }
  // U8 [F, H, W, 3], a read-only view into the shard's mapping.
  Tensor clip(int64_t index) const;

 private:
  ClipGeometry geometry_;
  Layout layout_ = Layout::kRandom;
  std::vector<uint64_t> seeds_;
  std::vector<std::string> captions_;
  std::vector<SafetensorsFile> shards_;
  std::vector<std::pair<size_t, int64_t>> where_;  // clip -> (shard, row)
};

}  // namespace vidax::synth
