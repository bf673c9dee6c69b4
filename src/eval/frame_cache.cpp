#include "eval/frame_cache.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "io/safetensors.h"
#include "pipeline/model_hashes.h"

namespace vidax::eval {
namespace {

namespace fs = std::filesystem;

// Bumped when what a cached entry means changes (frame format, key fields).
constexpr const char* kCacheFormat = "vidax-eval-cache-1";

}  // namespace

std::string default_cache_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/<preset>/vidax inside a source tree (CMakeLists.txt two levels up).
    const fs::path build = exe.parent_path().parent_path();
    if (build.filename() == "build" && fs::is_regular_file(build.parent_path() / "CMakeLists.txt"))
      return (build / "eval-cache").lexically_normal().string();
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "vidax" / "eval").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "vidax" / "eval").string();
  return "eval-cache";
}

std::string model_fingerprint(const ModelFiles& files) {
  const nlohmann::json j = {{"dit", model_file_hashes(files.dit)},
                            {"t5", model_file_hashes(files.t5)},
                            {"vae", model_file_hashes(files.vae)},
                            {"tokenizer", model_file_hashes(files.tokenizer)}};
  return j.dump();  // keys sorted: the same files give the same text
}

std::string clip_key(const std::string& model_fingerprint, const std::string& canonical_config,
                     const std::string& prompt, const std::string& negative_prompt, uint64_t seed) {
  // JSON keeps the fields apart (no ambiguity from separators inside prompts).
  const nlohmann::json j = {{"format", kCacheFormat},      {"models", model_fingerprint},
                            {"config", canonical_config},  {"prompt", prompt},
                            {"negative", negative_prompt}, {"seed", seed}};
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  Sha256 h;
  h.update(text.data(), text.size());
  return Sha256::hex(h.finish());
}

FrameCache::FrameCache(std::string dir) : dir_(std::move(dir)) {}

std::string FrameCache::path_of(const std::string& key) const {
  return (fs::path(dir_) / (key + ".safetensors")).string();
}

std::optional<Tensor> FrameCache::load(const std::string& key, const Shape& shape) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  try {
    const SafetensorsFile f = SafetensorsFile::open(path);
    const auto it = f.metadata().find("format");
    if (it == f.metadata().end() || it->second != kCacheFormat) return std::nullopt;
    const Tensor t = f.tensor("frames");
    if (t.dtype() != DType::kU8 || t.shape() != shape) return std::nullopt;
    return t.clone();  // owned: the mapping goes away with `f`
  } catch (const InputError&) {
    return std::nullopt;  // a damaged entry is regenerated and overwritten
  }
}

void FrameCache::store(const std::string& key, const Tensor& frames,
                       const std::map<std::string, std::string>& metadata) const {
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw_input_error("--cache ", dir_, ": cannot create the folder (", ec.message(), ")");
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = kCacheFormat;
  write_safetensors(path_of(key), {{"frames", frames}}, meta);
}

}  // namespace vidax::eval
