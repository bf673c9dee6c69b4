// TorchCheckpoint: zip archive -> data.pkl -> restricted unpickler -> flat {name: tensor} dict ->
// views into the storage records. One function (index_archive) serves open() and
// validate_buffer().
#include "io/torch_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "core/error.h"
#include "io/text_escape.h"
#include "io/torch_pickle.h"
#include "io/zip_archive.h"

namespace vidax {
namespace {

// Small text records (version, byteorder) are a few bytes; anything larger is not one.
constexpr uint64_t kMaxSmallRecord = 64;

std::string small_record(const ZipArchive& zip, const ZipEntry& e) {
  if (e.uncompressed_size > kMaxSmallRecord) {
    throw_input_error(zip.label(), ": record ", quote_name(e.name), " is ", e.uncompressed_size,
                      " bytes, expected a short text");
  }
  const std::vector<std::byte> bytes = zip.read(e);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

void check_magic(const std::byte* data, size_t size, const std::string& label) {
  if (looks_like_legacy_torch(data, size)) {
    throw_input_error(label,
                      ": legacy PyTorch checkpoint (a bare pickle stream, written by torch.save "
                      "before PyTorch 1.6 or with _use_new_zipfile_serialization=False); "
                      "re-save it with a current PyTorch: torch.save(torch.load(f), f)");
  }
  if (!looks_like_zip(data, size)) {
    std::string head;
    for (size_t i = 0; i < std::min<size_t>(size, 4); ++i) {
      static constexpr char kHex[] = "0123456789abcdef";
      const auto b = static_cast<unsigned>(data[i]);
      head += str_cat(i ? " " : "", kHex[b >> 4], kHex[b & 15]);
    }
    throw_input_error(label, ": not a PyTorch zip checkpoint (starts with bytes [", head,
                      "], expected the zip signature 50 4b 03 04)");
  }
}

// The archive folder: the single "<folder>/data.pkl" record.
std::string find_prefix(const ZipArchive& zip) {
  std::string prefix;
  int found = 0;
  for (const ZipEntry& e : zip.entries()) {
    constexpr std::string_view kPickle = "/data.pkl";
    const std::string& n = e.name;
    if (n.size() > kPickle.size() &&
        n.compare(n.size() - kPickle.size(), kPickle.size(), kPickle) == 0 &&
        n.find('/') == n.size() - kPickle.size()) {
      prefix = n.substr(0, n.size() - kPickle.size() + 1);
      ++found;
    }
  }
  if (found == 0) {
    throw_input_error(zip.label(),
                      ": zip archive has no '<folder>/data.pkl' record, so it is not "
                      "a torch.save checkpoint (",
                      zip.entries().size(), " entries",
                      zip.entries().empty() ? "" : ", first " + quote_name(zip.entries()[0].name),
                      ")");
  }
  if (found > 1) {
    throw_input_error(zip.label(), ": zip archive holds ", found,
                      " '<folder>/data.pkl' records; expected one checkpoint per file");
  }
  for (const ZipEntry& e : zip.entries()) {
    if (e.name.compare(0, prefix.size(), prefix) != 0) {
      throw_input_error(zip.label(), ": entry ", quote_name(e.name), " is outside the folder ",
                        quote_name(prefix), " that holds data.pkl");
    }
  }
  return prefix;
}

TorchCheckpointIndex index_archive(const ZipArchive& zip) {
  const std::string& label = zip.label();
  TorchCheckpointIndex index;
  index.prefix = find_prefix(zip);

  if (const ZipEntry* e = zip.find(index.prefix + "byteorder")) {
    const std::string order = trim(small_record(zip, *e));
    if (order == "big") {
      throw_input_error(label,
                        ": checkpoint was saved on a big-endian machine (byteorder 'big'); "
                        "only little-endian checkpoints are supported");
    }
    if (order != "little") {
      throw_input_error(label, ": byteorder record holds ", quote_name(order),
                        ", expected 'little'");
    }
  }
  if (const ZipEntry* e = zip.find(index.prefix + "version")) {
    const std::string v = trim(small_record(zip, *e));
    if (v.empty() || v.size() > 8 || v.find_first_not_of("0123456789") != std::string::npos) {
      throw_input_error(label, ": version record holds ", quote_name(v),
                        ", expected a small integer");
    }
  }

  const ZipEntry& pkl = *zip.find(index.prefix + "data.pkl");
  if (pkl.uncompressed_size > kMaxTorchPickleBytes) {
    throw_input_error(label, ": ", quote_name(pkl.name), " is ", pkl.uncompressed_size,
                      " bytes, more than the ", kMaxTorchPickleBytes, "-byte limit");
  }
  const std::vector<std::byte> pickle = zip.read(pkl);
  const PickleGraph g = unpickle_torch(pickle, str_cat(label, ": ", pkl.name));

  const PickleObject& root = g.at(g.root);
  if (root.kind != PickleKind::kDict) {
    throw_input_error(label, ": ", pkl.name, " holds ", pickle_kind_name(root.kind),
                      ", expected a state dict {name: tensor} as torch.save(model.state_dict()) "
                      "writes");
  }
  std::map<std::string, size_t> seen;
  // A flat state dict, or dicts of them (training checkpoints: {"generator_ema": {name:
  // tensor}, "step": 5}): a nested tensor is named by its keys joined with '.', and in such a
  // checkpoint plain values (numbers, strings, None) are bookkeeping and skipped.
  bool nested = false;
  for (size_t i = 1; i < root.items.size(); i += 2)
    nested = nested || g.at(root.items[i]).kind == PickleKind::kDict;
  auto plain = [](PickleKind k) {
    return k == PickleKind::kNone || k == PickleKind::kBool || k == PickleKind::kInt ||
           k == PickleKind::kFloat || k == PickleKind::kString;
  };
  // Each dict is visited once: a dict reached twice (shared through the memo, or recursive) is
  // refused, so the tensors named never outnumber the pickle's items.
  std::set<const PickleObject*> visited;
  auto add_dict = [&](auto& self, const PickleObject& dict, const std::string& prefix,
                      int depth) -> void {
    if (!visited.insert(&dict).second)
      throw_input_error(label, ": ", pkl.name, ": byte ", dict.offset, ": the dict under ",
                        quote_name(prefix), " is reached twice (a shared or recursive dict is not ",
                        "a state dict)");
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const PickleObject& key = g.at(dict.items[i]);
      const PickleObject& value = g.at(dict.items[i + 1]);
      if (key.kind != PickleKind::kString) {
        throw_input_error(label, ": ", pkl.name, ": byte ", key.offset, ": state dict key is ",
                          pickle_kind_name(key.kind), ", expected a tensor name (string)");
      }
      const std::string name = prefix + key.text;
      const std::string where = str_cat(label, ": tensor ", quote_name(name), ": ");
      if (value.kind == PickleKind::kDict && depth < 4) {
        self(self, value, name + ".", depth + 1);
        continue;
      }
      if (nested && plain(value.kind)) continue;
      if (value.kind != PickleKind::kTensor) {
        throw_input_error(where, "value is ", pickle_kind_name(value.kind),
                          ", expected a tensor (vidax reads state dicts, or dicts of them up to ",
                          "4 deep)");
      }
      if (!seen.emplace(name, i).second) {
        throw_input_error(where, "appears twice in the state dict");
      }
      const TorchTensorRef& t = g.tensors[static_cast<size_t>(value.int_value)];
      const TorchStorageRef& s = g.storages[t.storage];
      const std::optional<DType> dtype = torch_storage_dtype(s.type_name);
      if (!dtype) {
        throw_input_error(where, "storage type torch.", s.type_name,
                          " is not supported (expected Float, BFloat16, Half, Long, Int or Float8 "
                          "storage)");
      }
      const std::string record_name = index.prefix + "data/" + s.key;
      const ZipEntry* record = zip.find(record_name);
      if (record == nullptr) {
        throw_input_error(where, "storage record ", quote_name(record_name), " is missing");
      }
      if (record->method != 0) {
        throw_input_error(where, "storage record ", quote_name(record_name),
                          " is compressed; tensor data must be stored uncompressed, as torch.save "
                          "writes it");
      }
      const size_t itemsize = dtype_size(*dtype);
      uint64_t storage_bytes = 0;
      if (__builtin_mul_overflow(static_cast<uint64_t>(s.numel), itemsize, &storage_bytes) ||
          storage_bytes != record->uncompressed_size) {
        throw_input_error(where, "storage ", quote_name(s.key), " of ", s.numel, " x ", s.type_name,
                          " needs ", s.numel, " x ", itemsize, " bytes but its record holds ",
                          record->uncompressed_size);
      }

      TorchTensorInfo info;
      info.entry.name = name;
      info.entry.dtype = *dtype;
      info.entry.shape = Shape(std::span<const int64_t>(t.sizes));
      info.strides = t.strides;
      info.storage_offset = t.storage_offset;
      info.storage_key = s.key;
      info.record_offset = record->data_offset;
      info.record_bytes = record->uncompressed_size;
      // The unpickler checked offset + span < numel, so these byte offsets fit the record.
      const bool empty = info.entry.shape.numel() == 0;
      int64_t last = t.storage_offset;
      if (!empty) {
        for (size_t d = 0; d < t.sizes.size(); ++d) last += (t.sizes[d] - 1) * t.strides[d];
      }
      info.entry.begin = static_cast<size_t>(record->data_offset +
                                             static_cast<uint64_t>(t.storage_offset) * itemsize);
      info.entry.end = empty ? info.entry.begin
                             : static_cast<size_t>(record->data_offset +
                                                   (static_cast<uint64_t>(last) + 1) * itemsize);
      index.tensors.push_back(std::move(info));
    }
  };
  add_dict(add_dict, root, "", 0);
  std::sort(index.tensors.begin(), index.tensors.end(),
            [](const TorchTensorInfo& a, const TorchTensorInfo& b) {
              return std::tie(a.entry.begin, a.entry.name) < std::tie(b.entry.begin, b.entry.name);
            });
  return index;
}

}  // namespace

bool looks_like_zip(const std::byte* data, size_t size) {
  return size >= 4 && data[0] == std::byte{'P'} && data[1] == std::byte{'K'} &&
         ((data[2] == std::byte{3} && data[3] == std::byte{4}) ||
          (data[2] == std::byte{5} && data[3] == std::byte{6}));
}

bool looks_like_legacy_torch(const std::byte* data, size_t size) {
  return size >= 2 && data[0] == std::byte{0x80} && data[1] >= std::byte{2} &&
         data[1] <= std::byte{5};
}

TorchCheckpointIndex TorchCheckpoint::validate_buffer(const std::byte* data, size_t size,
                                                      const std::string& label) {
  check_magic(data, size, label);
  return index_archive(ZipArchive::from_buffer(data, size, label));
}

TorchCheckpoint TorchCheckpoint::open(const std::string& path) {
  TorchCheckpoint ck;
  ck.path_ = path;
  ck.file_ = MappedFile::open(path);
  ck.index_ = validate_buffer(ck.file_->data(), ck.file_->size(), path);
  ck.entries_.reserve(ck.index_.tensors.size());
  for (size_t i = 0; i < ck.index_.tensors.size(); ++i) {
    ck.entries_.push_back(ck.index_.tensors[i].entry);
    ck.by_name_.emplace(ck.index_.tensors[i].entry.name, i);
  }
  return ck;
}

const TorchTensorInfo& TorchCheckpoint::info(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    throw_input_error(path_, ": no tensor named ", quote_name(name), " (the file holds ",
                      entries_.size(), " tensors)");
  }
  return index_.tensors[it->second];
}

const TensorEntry& TorchCheckpoint::entry(const std::string& name) const {
  return info(name).entry;
}

Tensor TorchCheckpoint::tensor(const std::string& name) const {
  const TorchTensorInfo& t = info(name);
  // One storage window per record: it keeps the mapping alive and bounds the view.
  auto storage = mapped_storage(file_, static_cast<size_t>(t.record_offset),
                                static_cast<size_t>(t.record_bytes));
  return Tensor::from_storage_strided(
      std::move(storage), t.entry.shape, t.strides, t.entry.dtype,
      static_cast<size_t>(t.storage_offset) * dtype_size(t.entry.dtype));
}

}  // namespace vidax
