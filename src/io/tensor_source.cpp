// TensorSource: resolves a file, a sharded index or a directory into a set of TensorFiles
// (safetensors or PyTorch zip checkpoints) and one name -> file map.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/text_escape.h"
#include "io/torch_checkpoint.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kIndexSuffix = ".safetensors.index.json";
constexpr std::string_view kFileSuffix = ".safetensors";
// weight_map indices are a few hundred KiB even for the largest public checkpoints.
constexpr uintmax_t kMaxIndexBytes = uintmax_t{64} << 20;
constexpr int kMaxIndexDepth = 16;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "nothing" : out;
}

// A shard must be a plain file name inside the index's folder.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string::npos;
}

std::string read_small_file(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw_input_error(path, ": cannot read: ", ec.message());
  if (size > kMaxIndexBytes) {
    throw_input_error(path, ": index is ", size, " bytes, more than the limit of ", kMaxIndexBytes);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw_input_error(path, ": read error");
  return ss.str();
}

// Picks the checkpoint inside a directory: the single index if there is one, else the single
// .safetensors file.
std::string resolve_directory(const std::string& dir) {
  std::vector<std::string> indices, files;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw_input_error(dir, ": cannot list directory: ", ec.message());
  for (const fs::directory_entry& entry : it) {
    std::error_code type_ec;
    if (!entry.is_regular_file(type_ec)) continue;  // follows symlinks (Hugging Face cache)
    const std::string name = entry.path().filename().string();
    if (ends_with(name, kIndexSuffix)) {
      indices.push_back(name);
    } else if (ends_with(name, kFileSuffix)) {
      files.push_back(name);
    }
  }
  std::sort(indices.begin(), indices.end());
  std::sort(files.begin(), files.end());
  if (indices.size() == 1) return (fs::path(dir) / indices[0]).string();
  if (indices.size() > 1) {
    throw_input_error(dir, ": directory holds ", indices.size(), " *", kIndexSuffix, " files (",
                      join(indices), "); expected exactly one, pass the one to use");
  }
  if (files.size() == 1) return (fs::path(dir) / files[0]).string();
  throw_input_error(dir, ": expected exactly one *", kIndexSuffix, " or exactly one *", kFileSuffix,
                    " file in the directory, found ", files.size(), " .safetensors files (",
                    join(files), ") and no index");
}

class SafetensorsTensorFile final : public TensorFile {
 public:
  explicit SafetensorsTensorFile(SafetensorsFile file) : file_(std::move(file)) {}
  std::string_view format() const override { return "safetensors"; }
  const std::string& path() const override { return file_.path(); }
  bool contains(const std::string& name) const override { return file_.contains(name); }
  const TensorEntry& entry(const std::string& name) const override { return file_.entry(name); }
  const std::vector<TensorEntry>& entries() const override { return file_.entries(); }
  Tensor tensor(const std::string& name) const override { return file_.tensor(name); }
  const std::map<std::string, std::string>& metadata() const override { return file_.metadata(); }
  void release_resident_pages() const override { file_.release_resident_pages(); }

 private:
  SafetensorsFile file_;
};

class TorchTensorFile final : public TensorFile {
 public:
  explicit TorchTensorFile(TorchCheckpoint file) : file_(std::move(file)) {}
  std::string_view format() const override { return "pytorch"; }
  const std::string& path() const override { return file_.path(); }
  bool contains(const std::string& name) const override { return file_.contains(name); }
  const TensorEntry& entry(const std::string& name) const override { return file_.entry(name); }
  const std::vector<TensorEntry>& entries() const override { return file_.entries(); }
  Tensor tensor(const std::string& name) const override { return file_.tensor(name); }
  const std::map<std::string, std::string>& metadata() const override {
    static const std::map<std::string, std::string> kEmpty;
    return kEmpty;
  }
  void release_resident_pages() const override { file_.release_resident_pages(); }

 private:
  TorchCheckpoint file_;
};

}  // namespace

std::shared_ptr<const TensorFile> open_tensor_file(const std::string& path) {
  // Sniff the first bytes; the chosen reader maps and validates the whole file itself.
  std::byte head[4] = {};
  size_t got = 0;
  if (std::ifstream in(path, std::ios::binary); in) {
    in.read(reinterpret_cast<char*>(head), sizeof(head));
    got = static_cast<size_t>(in.gcount());
  }
  if (looks_like_zip(head, got) || looks_like_legacy_torch(head, got)) {
    return std::make_shared<TorchTensorFile>(TorchCheckpoint::open(path));
  }
  return std::make_shared<SafetensorsTensorFile>(SafetensorsFile::open(path));
}

TensorSource TensorSource::open(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw_input_error(path,
                      ": no such file or directory (expected a .safetensors file, a PyTorch "
                      ".pth checkpoint, a *",
                      kIndexSuffix, " or a directory holding one)");
  }
  TensorSource source;
  source.path_ = fs::is_directory(status) ? resolve_directory(path) : path;

  if (!ends_with(source.path_, ".json")) {
    source.files_.push_back(open_tensor_file(source.path_));
    for (const TensorEntry& e : source.files_[0]->entries()) source.where_.emplace(e.name, 0);
    return source;
  }

  const std::string& index_path = source.path_;
  const std::string text = read_small_file(index_path);
  json index;
  // Real indices nest three levels ({"weight_map": {name: shard}}); the cap keeps a hostile
  // deeply nested file from building an enormous document.
  auto cap_depth = [&](int depth, json::parse_event_t event, json&) -> bool {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxIndexDepth) {
      throw_input_error(index_path, ": index JSON nests deeper than ", kMaxIndexDepth, " levels");
    }
    return true;
  };
  try {
    index = json::parse(text, cap_depth);
  } catch (const json::exception& e) {
    throw_input_error(index_path, ": index is not valid JSON: ", ascii_only(e.what()));
  }
  if (!index.is_object()) throw_input_error(index_path, ": index must be a JSON object");
  const auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object()) {
    throw_input_error(index_path,
                      ": index needs a \"weight_map\" object {tensor name: shard file name}");
  }
  if (map_it->empty()) throw_input_error(index_path, ": weight_map lists no tensors");

  // Shards in file-name order, each opened once.
  std::map<std::string, std::string> listed;  // tensor -> shard name
  std::map<std::string, size_t> shard_slot;
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string()) {
      throw_input_error(index_path, ": weight_map entry for tensor ", quote_name(tensor),
                        " must be a shard file name (string)");
    }
    const std::string shard_name = shard.get<std::string>();
    if (!is_plain_file_name(shard_name)) {
      throw_input_error(index_path, ": shard ", quote_name(shard_name), " for tensor ",
                        quote_name(tensor),
                        " escapes the index folder (expected a plain file name in that folder: "
                        "no '/' or '\\', not '.' or '..')");
    }
    listed.emplace(tensor, shard_name);
    shard_slot.emplace(shard_name, 0);
  }
  const fs::path folder = fs::path(index_path).parent_path();
  std::vector<std::string> shard_names;
  for (auto& [shard_name, slot] : shard_slot) {
    const std::string shard_path = (folder / shard_name).string();
    std::error_code exists_ec;
    if (!fs::exists(shard_path, exists_ec)) {
      throw_input_error(index_path, ": shard ", quote_name(shard_name),
                        " does not exist (looked for ", shard_path, ")");
    }
    slot = source.files_.size();
    source.files_.push_back(open_tensor_file(shard_path));
    shard_names.push_back(shard_name);
  }

  for (size_t i = 0; i < source.files_.size(); ++i) {
    for (const TensorEntry& e : source.files_[i]->entries()) {
      const auto [it, inserted] = source.where_.emplace(e.name, i);
      if (!inserted) {
        throw_input_error(index_path, ": tensor ", quote_name(e.name),
                          " appears in two shards: ", quote_name(shard_names[it->second]), " and ",
                          quote_name(shard_names[i]));
      }
    }
  }
  for (const auto& [tensor, shard_name] : listed) {
    const size_t slot = shard_slot.at(shard_name);
    if (!source.files_[slot]->contains(tensor)) {
      throw_input_error(index_path, ": tensor ", quote_name(tensor), " is listed in shard ",
                        quote_name(shard_name), " but that shard does not hold it");
    }
  }
  return source;
}

std::vector<std::string> TensorSource::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, slot] : where_) out.push_back(name);
  return out;
}

const TensorFile& TensorSource::holder(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) {
    throw_input_error(path_, ": no tensor named ", quote_name(name), " (the checkpoint holds ",
                      where_.size(), " tensors)");
  }
  return *files_[it->second];
}

const TensorEntry& TensorSource::entry(const std::string& name) const {
  return holder(name).entry(name);
}

Tensor TensorSource::tensor(const std::string& name) const { return holder(name).tensor(name); }

const std::string& TensorSource::file_of(const std::string& name) const {
  return holder(name).path();
}

const std::map<std::string, std::string>& TensorSource::metadata() const {
  static const std::map<std::string, std::string> kEmpty;
  return files_.empty() ? kEmpty : files_.front()->metadata();
}

std::string_view TensorSource::format() const {
  return files_.empty() ? std::string_view("none") : files_.front()->format();
}

void TensorSource::release_resident_pages() const {
  for (const auto& f : files_) f->release_resident_pages();
}

}  // namespace vidax
