// Atomic safetensors writer (io/atomic_file.h: temporary file in the target folder, fsync, rename).
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace vidax {

using nlohmann::json;

void write_safetensors_lazy(const std::string& path, const std::vector<LazyTensor>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const LazyTensor& t : tensors) {
    if (t.name == "__metadata__") {
      throw_input_error(path, ": '__metadata__' is reserved and cannot name a tensor");
    }
    if (!t.make) throw_input_error(path, ": tensor '", t.name, "' is undefined");
    if (!seen.insert(t.name).second) {
      throw_input_error(path, ": duplicate tensor name '", t.name, "' (names must be unique)");
    }
    const uint64_t bytes = static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype);
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape.to_vector()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // names or metadata that are not valid UTF-8
    throw_input_error(path, ": cannot encode the header: ", e.what());
  }
  // Padding keeps the data section 8-byte aligned relative to the start of the file.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxSafetensorsHeaderBytes) {
    throw_input_error(path, ": header would be ", text.size(), " bytes, over the ",
                      kMaxSafetensorsHeaderBytes, "-byte limit readers accept");
  }
  unsigned char length_le[8];
  for (int i = 0; i < 8; ++i) {
    length_le[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  }

  AtomicFile out(path);
  out.write_all(length_le, sizeof(length_le));
  out.write_all(text.data(), text.size());
  for (const LazyTensor& lt : tensors) {
    if (lt.shape.numel() == 0) continue;
    const Tensor t = lt.make();  // one tensor in memory at a time
    VIDAX_CHECK(t.defined() && t.shape() == lt.shape && t.dtype() == lt.dtype, path, ": tensor '",
                lt.name, "' was declared ", lt.shape.str(), " ", dtype_name(lt.dtype), ", made ",
                t.defined() ? t.describe() : "undefined");
    const Tensor c = t.contiguous();  // one copy at a time, only for strided views
    out.write_all(c.raw_data(), c.nbytes());
  }
  out.commit();
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<LazyTensor> lazy;
  lazy.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw_input_error(path, ": tensor '", name, "' is undefined");
    lazy.push_back({name, t.shape(), t.dtype(), [&t = t] { return t; }});
  }
  write_safetensors_lazy(path, lazy, metadata);
}

}  // namespace vidax
