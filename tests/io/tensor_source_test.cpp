// TensorSource: single files, sharded indices (and their failure modes), directory resolution.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using testing::throws_input_error;

Tensor floats(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_floats(v, {n});
}

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

// Two shards {a, b} and {c} plus an index, in `dir`.
void write_sharded(const std::string& dir,
                   const std::string& index_name = "model.safetensors.index.json",
                   const std::string& weight_map =
                       "{\"a\": \"model-00001-of-00002.safetensors\", "
                       "\"b\": \"model-00001-of-00002.safetensors\", "
                       "\"c\": \"model-00002-of-00002.safetensors\"}") {
  write_safetensors(dir + "/" + kShard1, {{"a", floats({1, 2})}, {"b", floats({3})}},
                    {{"config", "{\"dim\": 2}"}});
  write_safetensors(dir + "/" + kShard2, {{"c", floats({4, 5, 6})}}, {{"config", "second"}});
  testing::write_bytes(dir + "/" + index_name,
                       "{\"metadata\": {\"total_size\": 24}, \"weight_map\": " + weight_map + "}");
}

TEST(TensorSource, SingleFile) {
  testing::TempDir dir;
  const std::string path = dir.file("one.safetensors");
  write_safetensors(path, {{"y", floats({1})}, {"x", floats({2, 3})}}, {{"k", "v"}});
  const TensorSource src = TensorSource::open(path);
  EXPECT_EQ(src.path(), path);
  EXPECT_EQ(src.names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(src.entry("x").shape, Shape({2}));
  EXPECT_EQ(src.tensor("x").data<float>()[1], 3.0f);
  EXPECT_EQ(src.file_of("y"), path);
  EXPECT_EQ(src.metadata().at("k"), "v");
  EXPECT_TRUE(src.contains("y"));
  EXPECT_FALSE(src.contains("z"));
  EXPECT_TRUE(throws_input_error([&] { src.tensor("z"); }, {path, "no tensor named 'z'"}));
  EXPECT_TRUE(throws_input_error([&] { src.file_of("z"); }, {"'z'"}));
}

TEST(TensorSource, ShardedIndex) {
  testing::TempDir dir;
  write_sharded(dir.path());
  const std::string index = dir.file("model.safetensors.index.json");
  const TensorSource src = TensorSource::open(index);
  EXPECT_EQ(src.path(), index);
  EXPECT_EQ(src.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(src.files().size(), 2u);
  EXPECT_EQ(src.file_of("a"), dir.file(kShard1));
  EXPECT_EQ(src.file_of("c"), dir.file(kShard2));
  EXPECT_EQ(src.tensor("c").data<float>()[2], 6.0f);
  EXPECT_EQ(src.tensor("b").data<float>()[0], 3.0f);
  EXPECT_EQ(src.entry("a").shape, Shape({2}));
  EXPECT_EQ(src.metadata().at("config"), "{\"dim\": 2}");  // first shard by file name
  EXPECT_TRUE(throws_input_error([&] { src.entry("d"); }, {index, "no tensor named 'd'"}));
}

TEST(TensorSource, ShardTensorsAbsentFromWeightMapAreStillServed) {
  testing::TempDir dir;
  write_sharded(dir.path(), "model.safetensors.index.json",
                "{\"a\": \"model-00001-of-00002.safetensors\", "
                "\"c\": \"model-00002-of-00002.safetensors\"}");
  const TensorSource src = TensorSource::open(dir.file("model.safetensors.index.json"));
  EXPECT_TRUE(src.contains("b"));
}

TEST(TensorSource, MissingShard) {
  testing::TempDir dir;
  write_sharded(dir.path());
  fs::remove(dir.file(kShard2));
  const std::string index = dir.file("model.safetensors.index.json");
  EXPECT_TRUE(
      throws_input_error([&] { TensorSource::open(index); },
                         {index, "shard 'model-00002-of-00002.safetensors' does not exist"}));
}

TEST(TensorSource, TensorMissingFromItsShard) {
  testing::TempDir dir;
  write_sharded(dir.path(), "model.safetensors.index.json",
                "{\"a\": \"model-00001-of-00002.safetensors\", "
                "\"ghost\": \"model-00001-of-00002.safetensors\", "
                "\"c\": \"model-00002-of-00002.safetensors\"}");
  const std::string index = dir.file("model.safetensors.index.json");
  EXPECT_TRUE(throws_input_error(
      [&] { TensorSource::open(index); },
      {index, "tensor 'ghost' is listed in shard 'model-00001-of-00002.safetensors'",
       "does not hold it"}));
}

TEST(TensorSource, TensorListedInTheWrongShard) {
  testing::TempDir dir;
  write_sharded(dir.path(), "model.safetensors.index.json",
                "{\"a\": \"model-00002-of-00002.safetensors\", "
                "\"c\": \"model-00001-of-00002.safetensors\"}");
  const std::string index = dir.file("model.safetensors.index.json");
  EXPECT_TRUE(throws_input_error([&] { TensorSource::open(index); },
                                 {index,
                                  "tensor 'a' is listed in shard "
                                  "'model-00002-of-00002.safetensors'"}));
}

TEST(TensorSource, ShardNamesMayNotEscapeTheFolder) {
  for (const std::string shard : {"../model-00001-of-00002.safetensors", "sub/x.safetensors",
                                  "/etc/passwd", "..", ".", "a\\b.safetensors", ""}) {
    testing::TempDir dir;
    write_sharded(dir.path(), "model.safetensors.index.json",
                  "{\"a\": \"" +
                      (shard == "a\\b.safetensors" ? std::string("a\\\\b.safetensors") : shard) +
                      "\"}");
    const std::string index = dir.file("model.safetensors.index.json");
    EXPECT_TRUE(throws_input_error([&] { TensorSource::open(index); },
                                   {index, "tensor 'a'", "escapes the index folder"}))
        << shard;
  }
}

TEST(TensorSource, DuplicateTensorAcrossShardsNamesBothShards) {
  testing::TempDir dir;
  write_sharded(dir.path());
  write_safetensors(dir.file(kShard2), {{"c", floats({4})}, {"a", floats({9, 9})}});
  const std::string index = dir.file("model.safetensors.index.json");
  EXPECT_TRUE(throws_input_error([&] { TensorSource::open(index); },
                                 {index, "tensor 'a' appears in two shards", kShard1, kShard2}));
}

TEST(TensorSource, MalformedIndex) {
  testing::TempDir dir;
  write_sharded(dir.path());
  const std::string index = dir.file("bad.safetensors.index.json");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"weight_map\": ", "index is not valid JSON"},
      {"[1]", "index must be a JSON object"},
      {"{\"metadata\": {}}", "needs a \"weight_map\" object"},
      {"{\"weight_map\": [\"a\"]}", "needs a \"weight_map\" object"},
      {"{\"weight_map\": {}}", "weight_map lists no tensors"},
      {"{\"weight_map\": {\"a\": 1}}", "weight_map entry for tensor 'a' must be a shard file name"},
      {"{\"weight_map\": " + std::string(40, '[') + std::string(40, ']') + "}", "nests deeper"},
  };
  for (const auto& [text, phrase] : cases) {
    testing::write_bytes(index, text);
    EXPECT_TRUE(throws_input_error([&] { TensorSource::open(index); }, {index, phrase})) << text;
  }
}

TEST(TensorSource, DirectoryPrefersTheIndex) {
  testing::TempDir dir;
  write_sharded(dir.path(), "diffusion_pytorch_model.safetensors.index.json");
  testing::write_bytes(dir.file("config.json"), "{}");
  const TensorSource src = TensorSource::open(dir.path());
  EXPECT_EQ(src.path(), dir.file("diffusion_pytorch_model.safetensors.index.json"));
  EXPECT_EQ(src.names().size(), 3u);
}

TEST(TensorSource, DirectoryWithOneFile) {
  testing::TempDir dir;
  write_safetensors(dir.file("diffusion_pytorch_model.safetensors"), {{"w", floats({7})}});
  testing::write_bytes(dir.file("config.json"), "{}");
  const TensorSource src = TensorSource::open(dir.path());
  EXPECT_EQ(src.path(), dir.file("diffusion_pytorch_model.safetensors"));
  EXPECT_EQ(src.tensor("w").data<float>()[0], 7.0f);
}

TEST(TensorSource, DirectoryAmbiguousOrEmptyListsWhatItFound) {
  testing::TempDir dir;
  EXPECT_TRUE(throws_input_error([&] { TensorSource::open(dir.path()); },
                                 {dir.path(), "found 0 .safetensors files (nothing)"}));
  write_safetensors(dir.file("x.safetensors"), {{"w", floats({1})}});
  write_safetensors(dir.file("y.safetensors"), {{"w", floats({2})}});
  EXPECT_TRUE(throws_input_error(
      [&] { TensorSource::open(dir.path()); },
      {dir.path(), "found 2 .safetensors files (x.safetensors, y.safetensors) and no index"}));
  testing::write_bytes(dir.file("a.safetensors.index.json"), "{}");
  testing::write_bytes(dir.file("b.safetensors.index.json"), "{}");
  EXPECT_TRUE(throws_input_error([&] { TensorSource::open(dir.path()); },
                                 {dir.path(),
                                  "2 *.safetensors.index.json files (a.safetensors.index.json, "
                                  "b.safetensors.index.json)"}));
}

TEST(TensorSource, MissingPathAndBrokenFile) {
  testing::TempDir dir;
  const std::string missing = dir.file("nothing.safetensors");
  EXPECT_TRUE(throws_input_error([&] { TensorSource::open(missing); },
                                 {missing, "no such file or directory"}));
  const std::string broken = dir.file("broken.safetensors");
  testing::write_bytes(broken, "abc");
  EXPECT_TRUE(
      throws_input_error([&] { TensorSource::open(broken); }, {broken, "shorter than the 8-byte"}));
}

TEST(TensorSource, BrokenShardIsNamed) {
  testing::TempDir dir;
  write_sharded(dir.path());
  testing::write_bytes(dir.file(kShard2), testing::u64_le(2) + "[]");
  EXPECT_TRUE(throws_input_error([&] { TensorSource::open(dir.path()); },
                                 {dir.file(kShard2), "must be a JSON object"}));
}

TEST(TensorSource, RealFixtureThroughADirectory) {
  VIDAX_REQUIRE_FIXTURE(fixture, "dit_t2v_tiny.weights.safetensors");
  testing::TempDir dir;
  fs::create_symlink(fixture, dir.file("model.safetensors"));  // as in a Hugging Face cache
  const TensorSource src = TensorSource::open(dir.path());
  EXPECT_EQ(src.names().size(), 69u);
  EXPECT_EQ(src.entry("blocks.0.self_attn.q.weight").shape, Shape({256, 256}));
  EXPECT_EQ(src.metadata().count("config"), 1u);
}

}  // namespace
}  // namespace vidax
