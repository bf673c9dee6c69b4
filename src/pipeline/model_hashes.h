// SHA-256 fingerprints of model files for generation sidecars, with a cache so a 20 GB
// checkpoint is hashed once, not on every run. The cache ($XDG_CACHE_HOME/vidax/sha256.json,
// else ~/.cache/vidax/sha256.json) maps an absolute path to its digest together with the size
// and modification time it had; a changed file is hashed again. A cache that cannot be read or
// written is ignored (hashing still works). Not safe for concurrent use within one process.
#pragma once

#include <map>
#include <string>

namespace vidax {

// Hex digest of a file; for a folder (diffusers components) a map entry per regular file
// directly inside it, keyed "folder/name". InputError naming the path if it cannot be read.
std::map<std::string, std::string> model_file_hashes(const std::string& path);

std::string hash_cache_path();

}  // namespace vidax
