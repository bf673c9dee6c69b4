// libFuzzer target for the safetensors parser. validate_buffer() is the parser open() runs on a
// mapped file, so this exercises the code that reads real checkpoints. Any input must either be
// rejected with InputError or yield a header whose guarantees hold; every other outcome (crash,
// sanitizer report, another exception type, a broken guarantee) is a finding.
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

namespace {

[[noreturn]] void broken_guarantee() { __builtin_trap(); }

void check_guarantees(const vidax::SafetensorsHeader& header, const uint8_t* data, size_t size) {
  if (header.data_start < 8 || header.data_start > size) broken_guarantee();
  const size_t data_size = size - header.data_start;
  size_t previous_end = 0;
  const vidax::TensorEntry* previous = nullptr;
  for (const vidax::TensorEntry& e : header.entries) {
    if (e.begin > e.end || e.end > data_size) broken_guarantee();
    if (static_cast<size_t>(e.shape.numel()) * vidax::dtype_size(e.dtype) != e.end - e.begin) {
      broken_guarantee();
    }
    if (previous != nullptr && e.begin < previous->begin) broken_guarantee();  // sorted
    if (e.begin != e.end) {
      if (e.begin < previous_end) broken_guarantee();  // disjoint
      previous_end = e.end;
    }
    previous = &e;
    // Touch the first and last byte of the claimed range: AddressSanitizer flags any range that
    // reaches outside the input.
    if (e.begin != e.end) {
      volatile uint8_t sink = data[header.data_start + e.begin];
      sink = data[header.data_start + e.end - 1];
      (void)sink;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vidax::SafetensorsHeader header = vidax::SafetensorsFile::validate_buffer(
        reinterpret_cast<const std::byte*>(data), size, "fuzz-input");
    check_guarantees(header, data, size);
  } catch (const vidax::InputError&) {
    // The expected outcome for malformed input.
  }
  return 0;
}
