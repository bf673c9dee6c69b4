#include "pipeline/model_hashes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json load_cache() {
  std::ifstream in(hash_cache_path());
  if (!in) return json::object();
  try {
    json j = json::parse(in);
    return j.is_object() ? j : json::object();
  } catch (const std::exception&) {
    return json::object();  // a damaged cache is rebuilt
  }
}

void save_cache(const json& cache) {
  const std::string path = hash_cache_path();
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    if (!out) return;
    out << cache.dump(1, ' ', false, json::error_handler_t::replace);
    if (!out) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

std::string hash_one(const fs::path& file, json& cache, bool& dirty) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw_input_error(file.string(), ": cannot read");
  std::error_code ec;
  const std::string key = fs::absolute(file, ec).lexically_normal().string();
  const auto size = static_cast<int64_t>(st.st_size);
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  if (cache.contains(key)) {
    const json& e = cache[key];
    // Entries are only trusted when every field has the right type (the cache may be damaged).
    if (e.is_object() && e.contains("size") && e["size"].is_number_integer() &&
        e.contains("mtime_ns") && e["mtime_ns"].is_number_integer() && e.contains("sha256") &&
        e["sha256"].is_string() && e["size"].get<int64_t>() == size &&
        e["mtime_ns"].get<int64_t>() == mtime_ns)
      return e["sha256"].get<std::string>();
  }
  std::string digest = sha256_file(file.string());
  cache[key] = {{"size", size}, {"mtime_ns", mtime_ns}, {"sha256", digest}};
  dirty = true;
  return digest;
}

}  // namespace

std::string hash_cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/vidax/sha256.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/vidax/sha256.json";
  return "/tmp/vidax-sha256.json";
}

std::map<std::string, std::string> model_file_hashes(const std::string& path) {
  json cache = load_cache();
  bool dirty = false;
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::string folder = fs::path(path).lexically_normal().filename().string();
    for (const auto& f : files)
      out[folder + "/" + f.filename().string()] = hash_one(f, cache, dirty);
  } else {
    out[fs::path(path).filename().string()] = hash_one(path, cache, dirty);
    // A sharded checkpoint: the index names the shards that hold the weights.
    const std::string index_suffix = ".index.json";
    if (path.size() > index_suffix.size() &&
        path.compare(path.size() - index_suffix.size(), index_suffix.size(), index_suffix) == 0) {
      std::ifstream in(path);
      const json index = json::parse(in, nullptr, false);
      if (index.is_object() && index.contains("weight_map") && index["weight_map"].is_object()) {
        std::set<std::string> shards;
        for (const auto& [name, shard] : index["weight_map"].items())
          if (shard.is_string()) shards.insert(shard.get<std::string>());
        for (const auto& shard : shards) {
          // Shard names are plain file names (TensorSource enforces it when loading).
          if (shard.find('/') != std::string::npos || shard == "." || shard == "..") continue;
          out[shard] = hash_one(fs::path(path).parent_path() / shard, cache, dirty);
        }
      }
    }
  }
  if (dirty) save_cache(cache);
  return out;
}

}  // namespace vidax
