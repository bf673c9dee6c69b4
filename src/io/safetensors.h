// safetensors checkpoints: memory-mapped, zero-copy reading with strict validation, sharded
// checkpoints through `*.safetensors.index.json`, and an atomic writer.
//
// Every violation of the format (header length out of bounds, bad JSON, unknown dtype, offsets
// outside the data section, overlapping tensors, prod(shape) * itemsize != bytes, ...) throws
// InputError naming the file (and the tensor when there is one) and what was expected.
// A SafetensorsFile is immutable after open(); concurrent reads are safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/storage.h"
#include "core/tensor.h"

namespace vidax {

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  size_t begin = 0;  // byte offsets relative to the data section
  size_t end = 0;
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  // Parses an in-memory buffer (used by the fuzz target); `label` names it in errors.
  static void validate_buffer(const std::byte* data, size_t size, const std::string& label);

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const TensorEntry& entry(const std::string& name) const;  // InputError if absent
  const std::vector<TensorEntry>& entries() const { return entries_; }  // file order
  // Zero-copy read-only view into the mapping.
  Tensor tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  size_t data_start_ = 0;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One or more safetensors files seen as a single name -> tensor map. `path` may be a single
// `.safetensors` file, a `*.safetensors.index.json` (weight_map to shards in the same folder), or
// a directory holding exactly one of those (index preferred). Duplicate names across shards are
// an error.
class TensorSource {
 public:
  static TensorSource open(const std::string& path);

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> names() const;  // sorted
  const TensorEntry& entry(const std::string& name) const;
  Tensor tensor(const std::string& name) const;
  const std::string& file_of(const std::string& name) const;
  // Metadata of the first shard (config etc.).
  const std::map<std::string, std::string>& metadata() const;

 private:
  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;
};

// Writes tensors (any float/int dtype, any strides) to `path` atomically: the data goes to a
// temporary file in the same folder which is renamed over `path` only when complete.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace vidax
