#include "pipeline/model_hashes.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax {
namespace {

// "abc" and "" have well-known digests (FIPS 180-2).
constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(ModelHashes, FileFolderAndCache) {
  testing::TempDir d;
  ::setenv("XDG_CACHE_HOME", d.file("cache").c_str(), 1);
  std::ofstream(d.file("w.safetensors")) << "abc";
  EXPECT_EQ(model_file_hashes(d.file("w.safetensors")).at("w.safetensors"), kAbc);
  EXPECT_TRUE(std::filesystem::exists(d.file("cache/vidax/sha256.json")));

  // Same size, new content and mtime: re-hashed, not served stale from the cache.
  std::filesystem::last_write_time(
      d.file("w.safetensors"),
      std::filesystem::file_time_type::clock::now() + std::chrono::hours(1));
  std::ofstream(d.file("w.safetensors")) << "abd";
  EXPECT_NE(model_file_hashes(d.file("w.safetensors")).at("w.safetensors"), kAbc);

  std::filesystem::create_directories(d.file("vae"));
  std::ofstream(d.file("vae/config.json")) << "";
  std::ofstream(d.file("vae/diffusion_pytorch_model.safetensors")) << "abc";
  const auto folder = model_file_hashes(d.file("vae"));
  ASSERT_EQ(folder.size(), 2u);
  EXPECT_EQ(folder.at("vae/config.json"), kEmpty);
  EXPECT_EQ(folder.at("vae/diffusion_pytorch_model.safetensors"), kAbc);

  // A damaged cache is ignored and rewritten.
  std::ofstream(d.file("cache/vidax/sha256.json")) << "{not json";
  EXPECT_EQ(model_file_hashes(d.file("vae/config.json")).at("config.json"), kEmpty);
  EXPECT_THROW(model_file_hashes(d.file("missing.bin")), InputError);
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace vidax

namespace vidax {
namespace {

TEST(ModelHashes, ShardedIndexHashesEveryShardAndSurvivesDamagedEntries) {
  testing::TempDir d;
  ::setenv("XDG_CACHE_HOME", d.file("cache").c_str(), 1);
  std::ofstream(d.file("m-1.safetensors")) << "abc";
  std::ofstream(d.file("m-2.safetensors")) << "";
  std::ofstream(d.file("m.safetensors.index.json"))
      << R"({"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-1.safetensors"}})";
  const auto h = model_file_hashes(d.file("m.safetensors.index.json"));
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h.at("m-1.safetensors"), kAbc);
  EXPECT_EQ(h.at("m-2.safetensors"), kEmpty);
  // Entries of the wrong type are re-hashed instead of throwing.
  std::filesystem::create_directories(d.file("cache/vidax"));
  std::ofstream(d.file("cache/vidax/sha256.json"))
      << "{\"" << std::filesystem::absolute(d.file("m-1.safetensors")).string() << "\": 5}";
  EXPECT_EQ(model_file_hashes(d.file("m-1.safetensors")).at("m-1.safetensors"), kAbc);
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace vidax
