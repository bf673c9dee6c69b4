// safetensors reader: one parser (parse_image) validates a whole file image, whether it comes
// from a memory mapping (open) or from a buffer (validate_buffer, used by the fuzz target).
#include "io/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/text_escape.h"

namespace vidax {
namespace {

using nlohmann::json;

// A safetensors header nests at most three levels: {name: {"shape": [extents]}}. Anything deeper
// is rejected while parsing, before a hostile header can build a huge nested document.
constexpr int kMaxJsonDepth = 3;

constexpr std::string_view kAcceptedDtypes = "F32, BF16, F16, F8_E4M3, F8_E5M2, I64, I32, U8";

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

const char* json_type_name(const json& j) {
  if (j.is_number_float()) return "a non-integer number";
  if (j.is_number()) return "an integer";
  return j.type_name();  // "null", "boolean", "string", "array", "object"
}

// Integers only: JSON numbers with a fraction or exponent, and integers beyond 64 bits (which
// nlohmann stores as doubles), are rejected by the callers.
std::optional<int64_t> as_int64(const json& j) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  return std::nullopt;
}

json parse_header_json(const char* begin, const char* end, const std::string& label) {
  // One set of keys per open object, to reject duplicate keys (nlohmann would silently keep the
  // last one, so two readers could disagree about which tensor a name means).
  std::vector<std::set<std::string>> open_objects;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw_input_error(label, ": header JSON nests deeper than a safetensors header (at most ",
                            kMaxJsonDepth, " levels: {name: {\"shape\": [...]}})");
        }
        if (event == json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get<std::string>()).second) {
          throw_input_error(label, ": duplicate key ", quote_name(parsed.get<std::string>()),
                            " in the header (each tensor and field must appear once)");
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(begin, end, on_event, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::out_of_range& e) {
    throw_input_error(label, ": header JSON holds a number out of range (", ascii_only(e.what()),
                      ")");
  } catch (const json::exception& e) {
    throw_input_error(label, ": header is not valid JSON: ", ascii_only(e.what()));
  }
}

std::map<std::string, std::string> parse_metadata(const json& j, const std::string& label) {
  std::map<std::string, std::string> out;
  if (j.is_null()) return out;  // some writers emit "__metadata__": null
  if (!j.is_object()) {
    throw_input_error(label, ": __metadata__ must be an object of strings, got ",
                      json_type_name(j));
  }
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) {
      throw_input_error(label, ": __metadata__ value for key ", quote_name(key),
                        " must be a string, got ", json_type_name(value));
    }
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

TensorEntry parse_entry(const std::string& name, const json& j, size_t data_size,
                        const std::string& label) {
  const std::string where = str_cat(label, ": tensor ", quote_name(name), ": ");
  if (!j.is_object()) {
    throw_input_error(where, "entry must be an object with dtype, shape and data_offsets, got ",
                      json_type_name(j));
  }
  TensorEntry e;
  e.name = name;

  const auto dtype_it = j.find("dtype");
  if (dtype_it == j.end()) throw_input_error(where, "missing 'dtype'");
  if (!dtype_it->is_string()) {
    throw_input_error(where, "'dtype' must be a string, got ", json_type_name(*dtype_it));
  }
  const std::string dtype_str = dtype_it->get<std::string>();
  const std::optional<DType> dtype = dtype_from_name(dtype_str);
  if (!dtype) {
    throw_input_error(where, "unknown dtype ", quote_name(dtype_str), " (expected one of ",
                      kAcceptedDtypes, ")");
  }
  e.dtype = *dtype;

  const auto shape_it = j.find("shape");
  if (shape_it == j.end()) throw_input_error(where, "missing 'shape'");
  if (!shape_it->is_array()) {
    throw_input_error(where, "'shape' must be an array of integers, got ",
                      json_type_name(*shape_it));
  }
  if (shape_it->size() > static_cast<size_t>(kMaxDims)) {
    throw_input_error(where, "rank ", shape_it->size(), " exceeds the maximum of ", kMaxDims);
  }
  std::vector<int64_t> dims;
  uint64_t nonzero_product = 1;  // bounds every prefix product Shape/Tensor will compute
  bool has_zero = false;
  for (size_t i = 0; i < shape_it->size(); ++i) {
    const json& d = (*shape_it)[i];
    const std::optional<int64_t> v = as_int64(d);
    if (!v) {
      throw_input_error(where, "shape[", i, "] must be an integer in int64 range, got ",
                        d.is_number_unsigned() ? "a value beyond int64" : json_type_name(d));
    }
    if (*v < 0) throw_input_error(where, "shape[", i, "] is negative (", *v, ")");
    if (*v == 0) {
      has_zero = true;
    } else if (__builtin_mul_overflow(nonzero_product, static_cast<uint64_t>(*v),
                                      &nonzero_product) ||
               nonzero_product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw_input_error(where, "element count overflows int64 (shape ", shape_it->dump(), ")");
    }
    dims.push_back(*v);
  }
  e.shape = Shape(std::span<const int64_t>(dims));
  const uint64_t numel = has_zero ? 0 : nonzero_product;
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes)) {
    throw_input_error(where, "byte size overflows (shape ", shape_it->dump(), " of ", dtype_str,
                      ")");
  }

  const auto off_it = j.find("data_offsets");
  if (off_it == j.end()) throw_input_error(where, "missing 'data_offsets'");
  if (!off_it->is_array() || off_it->size() != 2) {
    throw_input_error(where, "'data_offsets' must be an array [begin, end], got ",
                      off_it->is_array() ? str_cat("an array of ", off_it->size())
                                         : std::string(json_type_name(*off_it)));
  }
  uint64_t offsets[2] = {0, 0};
  for (size_t i = 0; i < 2; ++i) {
    const json& o = (*off_it)[i];
    if (!o.is_number_unsigned()) {  // nlohmann stores non-negative integers as unsigned
      throw_input_error(where, "data_offsets[", i, "] must be a non-negative integer, got ",
                        o.is_number_integer() ? "a negative integer" : json_type_name(o));
    }
    offsets[i] = o.get<uint64_t>();
  }
  if (offsets[0] > offsets[1]) {
    throw_input_error(where, "data_offsets begin ", offsets[0], " is after end ", offsets[1]);
  }
  if (offsets[1] > data_size) {
    throw_input_error(where, "data_offsets end ", offsets[1], " is beyond the data section (",
                      data_size, " bytes)");
  }
  if (offsets[1] - offsets[0] != nbytes) {
    throw_input_error(where, "shape ", e.shape.str(), " of ", dtype_str, " needs ", nbytes,
                      " bytes but data_offsets [", offsets[0], ", ", offsets[1], "] span ",
                      offsets[1] - offsets[0]);
  }
  e.begin = static_cast<size_t>(offsets[0]);
  e.end = static_cast<size_t>(offsets[1]);
  return e;
}

}  // namespace

SafetensorsHeader SafetensorsFile::validate_buffer(const std::byte* data, size_t size,
                                                   const std::string& label) {
  if (size < 8) {
    throw_input_error(label, ": file is ", size,
                      " bytes, shorter than the 8-byte header length prefix");
  }
  const uint64_t header_len = read_u64_le(data);
  if (header_len == 0) throw_input_error(label, ": header length is 0 (expected a JSON object)");
  if (header_len > kMaxSafetensorsHeaderBytes) {
    throw_input_error(label, ": header length ", header_len, " exceeds the limit of ",
                      kMaxSafetensorsHeaderBytes, " bytes (100 MiB)");
  }
  if (header_len > size - 8) {
    throw_input_error(label, ": header length ", header_len,
                      " extends beyond the end of the file (", size, " bytes; truncated file?)");
  }

  SafetensorsHeader out;
  out.data_start = 8 + static_cast<size_t>(header_len);
  const size_t data_size = size - out.data_start;
  const char* text = reinterpret_cast<const char*>(data + 8);
  // nlohmann stops at a NUL as if the input ended there, so "{...}\0<anything>" would pass; JSON
  // text never holds a raw NUL, so reject it before parsing.
  if (const void* nul = std::memchr(text, 0, static_cast<size_t>(header_len)); nul != nullptr) {
    throw_input_error(label, ": header is not valid JSON: NUL byte at header offset ",
                      static_cast<const char*>(nul) - text);
  }
  const json header = parse_header_json(text, text + header_len, label);
  if (!header.is_object()) {
    throw_input_error(label, ": header must be a JSON object, got ", json_type_name(header));
  }

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      out.metadata = parse_metadata(value, label);
    } else {
      out.entries.push_back(parse_entry(key, value, data_size, label));
    }
  }

  std::sort(out.entries.begin(), out.entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // Empty tensors occupy no bytes and cannot overlap anything; gaps between tensors are allowed.
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& e : out.entries) {
    if (e.begin == e.end) continue;
    if (previous != nullptr && e.begin < previous->end) {
      throw_input_error(label, ": tensors ", quote_name(previous->name), " [", previous->begin,
                        ", ", previous->end, ") and ", quote_name(e.name), " [", e.begin, ", ",
                        e.end, ") overlap (byte ranges must be disjoint)");
    }
    previous = &e;
  }
  return out;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.file_ = MappedFile::open(path);
  SafetensorsHeader header = validate_buffer(f.file_->data(), f.file_->size(), path);
  f.data_start_ = header.data_start;
  f.entries_ = std::move(header.entries);
  f.metadata_ = std::move(header.metadata);
  for (size_t i = 0; i < f.entries_.size(); ++i) f.index_.emplace(f.entries_[i].name, i);
  return f;
}

const TensorEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) {
    throw_input_error(path_, ": no tensor named ", quote_name(name), " (the file holds ",
                      entries_.size(), " tensors)");
  }
  return entries_[it->second];
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorEntry& e = entry(name);
  // One storage window per tensor: it keeps the mapping alive and bounds the view.
  return Tensor::from_storage(mapped_storage(file_, data_start_ + e.begin, e.end - e.begin),
                              e.shape, e.dtype);
}

}  // namespace vidax
