// PyTorch checkpoints as torch.save writes them since PyTorch 1.6: a zip archive holding
// `<prefix>/data.pkl` (the pickled state dict), one `<prefix>/data/<key>` record per storage,
// `<prefix>/version` and, in newer files, `<prefix>/byteorder`. Official Wan ships its T5 encoder
// and VAE this way (`models_t5_umt5-xxl-enc-bf16.pth`, `Wan2.1_VAE.pth`).
//
// TorchCheckpoint::open() maps the file, validates the zip (io/zip_archive.h), runs the restricted
// unpickler over data.pkl (io/torch_pickle.h: nothing is imported or executed) and resolves each
// tensor to a strided, read-only view into its storage record: zero-copy, shared storages
// allowed, every storage_offset / size / stride checked against the record's size. The pickled
// object must be a dict {name: tensor} (collections.OrderedDict or dict), which is what
// `torch.save(model.state_dict(), f)` writes and how every Wan .pth is stored, or a dict of such
// dicts (up to 4 deep) as training checkpoints hold them (Self-Forcing's `{"generator_ema":
// {...}}`): nested tensors are named by their keys joined with '.', and the plain values beside
// them (a step count, a string) are skipped. The legacy
// pre-1.6 format (a bare pickle stream) and big-endian files are refused with a clear message.
// validate_buffer() runs the same code on an in-memory image (the fuzz target uses it).
//
// write_torch_checkpoint() writes the same layout (zip stored, pickle protocol 2,
// _rebuild_tensor_v2, OrderedDict, 64-byte aligned records, ZIP64 when needed), so tests and
// tools can produce official-layout files without PyTorch; torch.load reads them.
//
// TorchCheckpoint is immutable after open(); concurrent reads are safe. Tensors keep the mapping
// alive. write_torch_checkpoint() is safe to call concurrently for different paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/storage.h"
#include "core/tensor.h"
#include "io/safetensors.h"

namespace vidax {

// data.pkl is read into memory; real ones are a few hundred KiB even for 10k-tensor models.
inline constexpr uint64_t kMaxTorchPickleBytes = uint64_t{64} << 20;

struct TorchTensorInfo {
  TensorEntry entry;             // name, dtype, shape; begin/end = file byte span the view touches
  std::vector<int64_t> strides;  // elements, one per dimension
  int64_t storage_offset = 0;    // elements
  std::string storage_key;       // record <prefix>/data/<key>
  uint64_t record_offset = 0;    // file offset of the record's first byte
  uint64_t record_bytes = 0;
};

struct TorchCheckpointIndex {
  std::string prefix;                    // archive folder, e.g. "archive/"
  std::vector<TorchTensorInfo> tensors;  // sorted by (file offset, name): storage order
};

class TorchCheckpoint {
 public:
  static TorchCheckpoint open(const std::string& path);
  // Validates an in-memory image of a whole file; `label` names it in errors. Same code path as
  // open().
  static TorchCheckpointIndex validate_buffer(const std::byte* data, size_t size,
                                              const std::string& label);

  const std::string& path() const { return path_; }
  const std::string& prefix() const { return index_.prefix; }
  bool contains(const std::string& name) const { return by_name_.count(name) != 0; }
  const TensorEntry& entry(const std::string& name) const;  // InputError if absent
  const TorchTensorInfo& info(const std::string& name) const;
  // Storage order (by file offset), the order a sequential reader wants.
  const std::vector<TensorEntry>& entries() const { return entries_; }
  // Zero-copy read-only view (strided as saved; may be non-contiguous or unaligned if the file
  // is unusual: consumers copy or convert, as with safetensors).
  Tensor tensor(const std::string& name) const;
  void release_resident_pages() const { file_->release_resident_pages(); }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  TorchCheckpointIndex index_;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> by_name_;
};

// True when the bytes start like a zip archive ("PK\3\4", or "PK\5\6" for an empty one).
bool looks_like_zip(const std::byte* data, size_t size);
// True when the bytes start like a bare pickle stream (legacy torch.save, before PyTorch 1.6).
bool looks_like_legacy_torch(const std::byte* data, size_t size);

struct TorchWriteOptions {
  std::string prefix = "archive";  // folder inside the zip (torch uses the file's stem or this)
  bool force_zip64 = false;        // ZIP64 records even when not needed (tests)
};

// Writes a flat state dict atomically (`path + ".tmp.<pid>"`, fsync, rename). Tensors of any
// strides are stored contiguous, one record each, in the given order. Throws InputError naming
// `path` on duplicate names, undefined tensors, dtypes torch has no storage for, or I/O failure.
void write_torch_checkpoint(const std::string& path,
                            const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const TorchWriteOptions& options = {});

}  // namespace vidax
