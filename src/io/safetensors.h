// safetensors checkpoints: memory-mapped, zero-copy reading with strict validation, sharded
// checkpoints through `*.safetensors.index.json`, and an atomic writer.
//
// Every violation of the format (header length out of bounds, bad JSON, unknown dtype, offsets
// outside the data section, overlapping tensors, prod(shape) * itemsize != bytes, ...) throws
// InputError whose message starts with the file path, names the tensor when there is one and
// says what was expected. SafetensorsFile::open() and validate_buffer() share one parser, so the
// fuzz target exercises exactly the code that reads real checkpoints. docs/io.md lists the rules.
//
// Tensors returned by tensor() are read-only views straight into the mapping. The format does
// not align tensor data, so such a view may be unaligned for its dtype (e.g. an F32 tensor at an
// odd byte offset); consumers copy or convert it before doing arithmetic on it. The mapping
// assumes the file is not truncated by someone else while it is open (that would fault, as with
// any mmap reader).
//
// SafetensorsFile and TensorSource are immutable after open(); concurrent reads are safe.
// write_safetensors() is safe to call concurrently for different paths.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/storage.h"
#include "core/tensor.h"

namespace vidax {

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  size_t begin = 0;  // byte offsets relative to the data section
  size_t end = 0;
};

// Header limits enforced by the reader (and respected by the writer).
inline constexpr size_t kMaxSafetensorsHeaderBytes = size_t{100} << 20;  // 100 MiB

// Result of parsing and validating a safetensors image.
struct SafetensorsHeader {
  size_t data_start = 0;             // 8 + header length: where the data section begins
  std::vector<TensorEntry> entries;  // sorted by (begin, end, name): storage order
  std::map<std::string, std::string> metadata;
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  // Parses and validates an in-memory image of a whole file (the fuzz target uses it); `label`
  // names it in errors. The same code path as open().
  static SafetensorsHeader validate_buffer(const std::byte* data, size_t size,
                                           const std::string& label);

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const TensorEntry& entry(const std::string& name) const;  // InputError if absent
  // Sorted by data offset (storage order), which is also the order a sequential reader wants.
  const std::vector<TensorEntry>& entries() const { return entries_; }
  // Zero-copy read-only view into the mapping (see the alignment note above).
  Tensor tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  void release_resident_pages() const { file_->release_resident_pages(); }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  size_t data_start_ = 0;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One checkpoint file as TensorSource sees it, whatever its format: a SafetensorsFile or a
// TorchCheckpoint (io/torch_checkpoint.h) behind one interface. Immutable; thread-safe reads.
class TensorFile {
 public:
  virtual ~TensorFile() = default;
  virtual std::string_view format() const = 0;  // "safetensors" or "pytorch"
  virtual const std::string& path() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  virtual const TensorEntry& entry(const std::string& name) const = 0;  // InputError if absent
  virtual const std::vector<TensorEntry>& entries() const = 0;          // storage order
  virtual Tensor tensor(const std::string& name) const = 0;
  virtual const std::map<std::string, std::string>& metadata() const = 0;  // empty for .pth
  virtual void release_resident_pages() const = 0;
};

// Opens one checkpoint file, choosing the format from its first bytes (a zip archive is a
// PyTorch checkpoint, a bare pickle is the refused legacy torch format, anything else is read as
// safetensors), so a misnamed file is still read correctly.
std::shared_ptr<const TensorFile> open_tensor_file(const std::string& path);

// One or more checkpoint files seen as a single name -> tensor map. `path` may be a single
// `.safetensors` file, a PyTorch checkpoint (`.pth`, `.pt`, `.ckpt`, `.bin`: the zip format of
// torch.save, detected by its magic bytes), a `*.index.json` (weight_map to shards in the same
// folder, shards of either format), or a directory holding exactly one
// `*.safetensors.index.json` (preferred) or else exactly one `.safetensors` file.
// Every tensor named in weight_map must be in the shard it names; shard names are plain file
// names (no '/', '\\', "." or ".."). Tensors present in a shard but absent from weight_map are
// still served. A name held by two shards is an error naming both.
class TensorSource {
 public:
  static TensorSource open(const std::string& path);

  // The file or index actually opened (a directory argument is resolved to it).
  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> names() const;                     // sorted
  const TensorEntry& entry(const std::string& name) const;    // InputError if absent
  Tensor tensor(const std::string& name) const;               // InputError if absent
  const std::string& file_of(const std::string& name) const;  // path of the holding file
  // Metadata of the first shard in file-name order (config etc.; empty for PyTorch files).
  const std::map<std::string, std::string>& metadata() const;
  // "safetensors" or "pytorch" (of the first shard).
  std::string_view format() const;
  const std::vector<std::shared_ptr<const TensorFile>>& files() const { return files_; }
  // Drops the mapped pages from this process's resident set (they are re-read on access). Call
  // after weights were packed into their own memory so peak RSS does not count them twice.
  void release_resident_pages() const;

 private:
  const TensorFile& holder(const std::string& name) const;

  std::string path_;
  std::vector<std::shared_ptr<const TensorFile>> files_;
  std::map<std::string, size_t> where_;
};

// Writes tensors (any dtype, any strides) to `path` atomically: the bytes go to
// `path + ".tmp.<pid>"` in the same folder, are fsync'ed, and the file is renamed over `path`
// only when complete. Tensors are stored consecutively in the given order (no gaps, so other
// readers that insist on a gap-free data section accept the file); the header is padded with
// spaces to a multiple of 8 bytes. Throws InputError naming `path` on duplicate or reserved
// names, undefined tensors, or any I/O failure (the temporary file is removed).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The same for tensors made one at a time while writing (a file larger than memory): the header
// comes from the declared shapes and dtypes; `make` must return exactly that.
struct LazyTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
  std::function<Tensor()> make;
};
void write_safetensors_lazy(const std::string& path, const std::vector<LazyTensor>& tensors,
                            const std::map<std::string, std::string>& metadata = {});

}  // namespace vidax
