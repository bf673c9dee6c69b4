// Reading the real fixtures: names, shapes, values, metadata, zero-copy views, and truncated
// copies that must always be rejected cleanly.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::throws_input_error;

constexpr const char* kDit = "dit_t2v_tiny.weights.safetensors";

TEST(SafetensorsRead, DitFixtureNamesShapesValuesAndMetadata) {
  VIDAX_REQUIRE_FIXTURE(path, kDit);
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.entries().size(), 69u);
  for (const TensorEntry& e : f.entries()) EXPECT_EQ(e.dtype, DType::kF32) << e.name;
  // Storage order, no overlaps: each tensor starts at or after the previous end.
  for (size_t i = 1; i < f.entries().size(); ++i) {
    EXPECT_GE(f.entries()[i].begin, f.entries()[i - 1].end) << f.entries()[i].name;
  }

  ASSERT_TRUE(f.contains("blocks.0.self_attn.q.weight"));
  EXPECT_FALSE(f.contains("blocks.0.self_attn.q.weights"));
  const TensorEntry& q = f.entry("blocks.0.self_attn.q.weight");
  EXPECT_EQ(q.shape, Shape({256, 256}));
  EXPECT_EQ(q.begin, 2507776u);
  EXPECT_EQ(q.end, 2769920u);
  EXPECT_EQ(f.entry("patch_embedding.weight").shape, Shape({256, 16, 1, 2, 2}));

  const Tensor t = f.tensor("blocks.0.self_attn.q.weight");
  EXPECT_EQ(t.describe(), "F32 [256, 256]");
  const float* v = t.data<float>();
  // Values read independently from the fixture bytes.
  EXPECT_FLOAT_EQ(v[0], 0.05676044151186943f);
  EXPECT_FLOAT_EQ(v[1], -0.05254979431629181f);
  EXPECT_FLOAT_EQ(v[2], -0.0097323227673769f);
  EXPECT_FLOAT_EQ(v[3], -0.08252576738595963f);

  ASSERT_EQ(f.metadata().count("config"), 1u);
  const auto config = nlohmann::json::parse(f.metadata().at("config"));
  EXPECT_EQ(config.at("dim").get<int>(), 256);
  EXPECT_EQ(config.at("num_layers").get<int>(), 2);
  EXPECT_EQ(f.metadata().at("model_type"), "t2v");
}

TEST(SafetensorsRead, Bf16FixtureIsTheF32WeightsRounded) {
  VIDAX_REQUIRE_FIXTURE(f32_path, kDit);
  VIDAX_REQUIRE_FIXTURE(bf16_path, "dit_t2v_tiny.bf16.safetensors");
  const SafetensorsFile f32 = SafetensorsFile::open(f32_path);
  const SafetensorsFile bf16 = SafetensorsFile::open(bf16_path);
  ASSERT_EQ(f32.entries().size(), bf16.entries().size());
  for (const char* name :
       {"blocks.0.self_attn.q.weight", "patch_embedding.weight", "blocks.1.ffn.0.weight"}) {
    const Tensor a = f32.tensor(name);
    const Tensor b = bf16.tensor(name);
    ASSERT_EQ(b.dtype(), DType::kBF16) << name;
    ASSERT_EQ(a.shape(), b.shape()) << name;
    const float* pa = a.data<float>();
    const BFloat16* pb = b.data<BFloat16>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < a.numel(); ++i) mismatches += f32_to_bf16(pa[i]) != pb[i].bits;
    EXPECT_EQ(mismatches, 0) << name;
  }
}

TEST(SafetensorsRead, TensorsAreReadOnlyViewsThatOutliveTheFile) {
  VIDAX_REQUIRE_FIXTURE(path, kDit);
  Tensor t, again;
  {
    const SafetensorsFile f = SafetensorsFile::open(path);
    t = f.tensor("blocks.0.self_attn.q.weight");
    again = f.tensor("blocks.0.self_attn.q.weight");
  }
  EXPECT_FALSE(t.writable());
  EXPECT_EQ(t.raw_data(), again.raw_data());  // both views point into the same mapping
  EXPECT_TRUE(t.is_contiguous());
  const Tensor copy = t.clone();
  EXPECT_NE(copy.raw_data(), t.raw_data());
  EXPECT_FLOAT_EQ(t.data<float>()[0], 0.05676044151186943f);  // mapping still alive
  EXPECT_TRUE(testing::all_close(copy, t, 0.0, 0.0, "clone of mapped tensor"));
}

TEST(SafetensorsRead, EveryFixtureParses) {
  VIDAX_REQUIRE_FIXTURE(probe, kDit);
  const std::string dir = probe.substr(0, probe.rfind('/'));
  int files = 0;
  for (const char* name :
       {"cfg_loop_tiny.io.safetensors", "dit_i2v_tiny.bf16.safetensors", "randn_cpu.safetensors",
        "sched_unipc.safetensors", "t5_tiny.weights.safetensors", "vae_tiny.weights.safetensors",
        "vae_tiny.diffusers.safetensors", "dit_t2v_tiny.diffusers.safetensors"}) {
    const std::string path = dir + "/" + name;
    if (!std::ifstream(path).good()) continue;
    const SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_FALSE(f.entries().empty()) << name;
    for (const TensorEntry& e : f.entries()) {
      const Tensor t = f.tensor(e.name);
      EXPECT_EQ(t.nbytes(), e.end - e.begin) << name << " " << e.name;
    }
    ++files;
  }
  EXPECT_GT(files, 0);
}

TEST(SafetensorsRead, UnknownTensorNameIsNamedInTheError) {
  VIDAX_REQUIRE_FIXTURE(path, kDit);
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_TRUE(throws_input_error([&] { f.entry("nope.weight"); },
                                 {path, "no tensor named 'nope.weight'", "69 tensors"}));
  EXPECT_TRUE(throws_input_error([&] { f.tensor("nope.weight"); }, {"'nope.weight'"}));
}

// Every prefix of a real file is invalid (its last tensor reaches the end of the file), so every
// cut must throw InputError; the guard page after each cut turns any over-read into a crash.
TEST(SafetensorsRead, TruncatedFixtureAlwaysRejected) {
  VIDAX_REQUIRE_FIXTURE(path, kDit);
  const std::string bytes = testing::read_bytes(path);
  const SafetensorsHeader full = SafetensorsFile::validate_buffer(
      reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), path);
  ASSERT_EQ(full.entries.back().end, bytes.size() - full.data_start);

  std::set<size_t> cuts;
  for (size_t n = 0; n <= full.data_start + 64; ++n) cuts.insert(n);   // all of the header
  for (size_t k = 0; k < 97; ++k) cuts.insert(bytes.size() * k / 97);  // spread over the data
  for (const TensorEntry& e : full.entries) {  // around every tensor boundary
    for (size_t edge : {e.begin, e.end}) {
      for (size_t d : {size_t{0}, size_t{1}, size_t{3}}) {
        if (full.data_start + edge >= d) cuts.insert(full.data_start + edge - d);
      }
    }
  }
  cuts.erase(bytes.size());
  cuts.insert(bytes.size() - 1);

  size_t rejected = 0;
  for (size_t n : cuts) {
    const testing::GuardedBuffer cut(bytes.substr(0, n));
    const std::string label = "cut" + std::to_string(n);
    const auto result = throws_input_error(
        [&] { SafetensorsFile::validate_buffer(cut.data(), cut.size(), label); }, {label + ": "});
    EXPECT_TRUE(result) << "cut at " << n;
    rejected += static_cast<bool>(result);
  }
  EXPECT_EQ(rejected, cuts.size());
  EXPECT_GT(rejected, 6000u);
}

// The same through real files and open(), on a smaller fixture.
TEST(SafetensorsRead, TruncatedFilesOnDiskRejected) {
  VIDAX_REQUIRE_FIXTURE(path, "t5_tiny.weights.safetensors");
  const std::string bytes = testing::read_bytes(path);
  testing::TempDir dir;
  const std::string cut_path = dir.file("cut.safetensors");
  for (size_t k = 0; k < 48; ++k) {
    const size_t n = k < 16 ? k : bytes.size() * (k - 15) / 33 - 1;
    testing::write_bytes(cut_path, bytes.substr(0, n));
    EXPECT_TRUE(throws_input_error([&] { SafetensorsFile::open(cut_path); }, {cut_path}))
        << "cut at " << n;
  }
  testing::write_bytes(cut_path, bytes);
  EXPECT_EQ(SafetensorsFile::open(cut_path).entries().size(), 22u);
}

}  // namespace
}  // namespace vidax
