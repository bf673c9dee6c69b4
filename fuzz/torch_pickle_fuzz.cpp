// libFuzzer target for PyTorch .pth checkpoints: zip reader + restricted unpickler + tensor
// resolution, through TorchCheckpoint::validate_buffer(), the code open() runs on a mapped file.
//
// Two kinds of input, told apart by the first bytes:
//  - "PK...": a whole archive, validated as is (exercises the zip reader);
//  - anything else: a data.pkl stream, wrapped here into a valid archive (correct CRCs) next to
//    storage records archive/data/0..15 of 64 bytes each, so mutations reach the unpickler and
//    the tensor checks instead of dying at the CRC check.
// Any input must be rejected with InputError or yield an index whose guarantees hold; anything
// else (crash, sanitizer report, another exception type, a broken guarantee) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/pth_test_util.h"
#include "io/torch_checkpoint.h"

namespace {

[[noreturn]] void broken_guarantee() { __builtin_trap(); }

void check_guarantees(const vidax::TorchCheckpointIndex& index, const uint8_t* data, size_t size) {
  for (const vidax::TorchTensorInfo& t : index.tensors) {
    const size_t itemsize = vidax::dtype_size(t.entry.dtype);
    if (t.record_offset > size || t.record_bytes > size - t.record_offset) broken_guarantee();
    if (t.entry.begin > t.entry.end || t.entry.begin < t.record_offset ||
        t.entry.end > t.record_offset + t.record_bytes) {
      broken_guarantee();
    }
    if (static_cast<int>(t.strides.size()) != t.entry.shape.rank()) broken_guarantee();
    if (t.entry.shape.numel() > 0) {
      // Recompute the last element independently of the reader.
      uint64_t last = static_cast<uint64_t>(t.storage_offset);
      for (int d = 0; d < t.entry.shape.rank(); ++d) {
        last += static_cast<uint64_t>(t.entry.shape[d] - 1) *
                static_cast<uint64_t>(t.strides[static_cast<size_t>(d)]);
      }
      if ((last + 1) * itemsize > t.record_bytes) broken_guarantee();
      // AddressSanitizer flags a claimed range that reaches outside the input.
      volatile uint8_t sink = data[t.entry.begin];
      sink = data[t.entry.end - 1];
      (void)sink;
    }
  }
}

void validate(const uint8_t* data, size_t size) {
  try {
    const vidax::TorchCheckpointIndex index = vidax::TorchCheckpoint::validate_buffer(
        reinterpret_cast<const std::byte*>(data), size, "fuzz-input");
    check_guarantees(index, data, size);
  } catch (const vidax::InputError&) {
    // The expected outcome for malformed input.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
    validate(data, size);
    return 0;
  }
  std::vector<vidax::testing::ZipItem> items;
  items.push_back(
      {"archive/data.pkl", std::string(reinterpret_cast<const char*>(data), size), false, 0});
  for (int i = 0; i < 16; ++i) {
    items.push_back(
        {"archive/data/" + std::to_string(i), std::string(64, static_cast<char>(i)), false, 0});
  }
  items.push_back({"archive/version", "3\n", false, 0});
  const std::string archive = vidax::testing::build_zip(items);
  validate(reinterpret_cast<const uint8_t*>(archive.data()), archive.size());
  return 0;
}
