// write_safetensors: byte-exact round trips for every dtype and for strided views, the on-disk
// layout other readers expect, and atomic replacement with clean failure.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using testing::throws_input_error;

constexpr DType kAllDtypes[] = {DType::kF32,    DType::kBF16, DType::kF16, DType::kF8E4M3,
                                DType::kF8E5M2, DType::kI64,  DType::kI32};

Tensor random_bytes_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor t = Tensor::zeros(shape, dtype);
  std::mt19937 gen(seed);
  auto* p = static_cast<unsigned char*>(t.raw_mutable_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(gen());
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.dtype() == cb.dtype() && ca.shape() == cb.shape() &&
         std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

std::vector<std::string> leftovers(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) out.push_back(name);
  }
  return out;
}

TEST(SafetensorsWriter, RoundTripsEveryDtypeByteForByte) {
  testing::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint32_t seed = 1;
  for (DType d : kAllDtypes) {
    // Odd sizes so later tensors start at offsets unaligned for their dtype.
    tensors.emplace_back(std::string(dtype_name(d)), random_bytes_tensor({3, 5}, d, seed++));
  }
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors, {{"purpose", "round trip"}, {"config", "{\"dim\": 4}"}});

  const SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const Tensor back = f.tensor(name);
    EXPECT_EQ(back.dtype(), t.dtype()) << name;
    EXPECT_EQ(back.shape(), Shape({3, 5})) << name;
    EXPECT_TRUE(same_bytes(back, t)) << name;
  }
  EXPECT_EQ(f.metadata().at("purpose"), "round trip");
  EXPECT_EQ(f.metadata().at("config"), "{\"dim\": 4}");
  EXPECT_TRUE(leftovers(dir.path()).empty());
}

TEST(SafetensorsWriter, StoresInGivenOrderConsecutivelyWithPaddedHeader) {
  testing::TempDir dir;
  const std::string path = dir.file("layout.safetensors");
  write_safetensors(path, {{"z", random_bytes_tensor({3}, DType::kBF16, 1)},
                           {"a", random_bytes_tensor({2, 2}, DType::kF32, 2)},
                           {"m", random_bytes_tensor({5}, DType::kF8E4M3, 3)}});
  const std::string bytes = testing::read_bytes(path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_len + 6 + 16 + 5);  // no gaps, nothing after the data
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.entry("z").begin, 0u);
  EXPECT_EQ(f.entry("a").begin, 6u);  // unaligned for F32: allowed, views tolerate it
  EXPECT_EQ(f.entry("m").begin, 22u);
  EXPECT_EQ(f.entry("m").end, 27u);
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(bytes.find("__metadata__"), std::string::npos);
}

TEST(SafetensorsWriter, NonContiguousViewsAreWrittenAsTheirLogicalValues) {
  testing::TempDir dir;
  const Tensor base = testing::random_tensor({4, 6, 5}, 7);
  const Tensor permuted = base.permute({2, 0, 1});                    // [5, 4, 6]
  const Tensor sliced = base.slice(1, 1, 5).slice(2, 2, 4);           // [4, 4, 2]
  const Tensor bf16_view = base.to(DType::kBF16).permute({1, 2, 0});  // [6, 5, 4]
  ASSERT_FALSE(permuted.is_contiguous());
  ASSERT_FALSE(sliced.is_contiguous());
  const std::string path = dir.file("views.safetensors");
  write_safetensors(path, {{"permuted", permuted}, {"sliced", sliced}, {"bf16", bf16_view}});

  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.entry("permuted").shape, Shape({5, 4, 6}));
  EXPECT_EQ(f.entry("sliced").shape, Shape({4, 4, 2}));
  EXPECT_TRUE(testing::all_close(f.tensor("permuted"), permuted, 0, 0, "permuted"));
  EXPECT_TRUE(testing::all_close(f.tensor("sliced"), sliced, 0, 0, "sliced"));
  EXPECT_TRUE(same_bytes(f.tensor("bf16"), bf16_view));
  // Spot-check one element against the index arithmetic, independent of contiguous().
  const float* p = f.tensor("permuted").data<float>();
  EXPECT_EQ(p[(3 * 4 + 2) * 6 + 1], base.data<float>()[(2 * 6 + 1) * 5 + 3]);
}

TEST(SafetensorsWriter, ScalarsAndZeroSizeTensors) {
  testing::TempDir dir;
  Tensor scalar = Tensor::zeros(Shape{}, DType::kI64);
  scalar.mutable_data<int64_t>()[0] = -42;
  const std::string path = dir.file("edge.safetensors");
  write_safetensors(path, {{"empty", Tensor::zeros({0, 3}, DType::kF16)},
                           {"scalar", scalar},
                           {"", Tensor::zeros({1}, DType::kI32)}});
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.tensor("scalar").rank(), 0);
  EXPECT_EQ(f.tensor("scalar").data<int64_t>()[0], -42);
  EXPECT_EQ(f.entry("empty").shape, Shape({0, 3}));
  EXPECT_EQ(f.tensor("empty").numel(), 0);
  EXPECT_TRUE(f.contains(""));
}

TEST(SafetensorsWriter, RewritesTheDitFixtureIdentically) {
  VIDAX_REQUIRE_FIXTURE(src_path, "dit_t2v_tiny.weights.safetensors");
  const SafetensorsFile src = SafetensorsFile::open(src_path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorEntry& e : src.entries()) tensors.emplace_back(e.name, src.tensor(e.name));
  testing::TempDir dir;
  const std::string path = dir.file("copy.safetensors");
  write_safetensors(path, tensors, src.metadata());
  const SafetensorsFile copy = SafetensorsFile::open(path);
  ASSERT_EQ(copy.entries().size(), 69u);
  EXPECT_EQ(copy.metadata(), src.metadata());
  for (const TensorEntry& e : src.entries()) {
    EXPECT_EQ(copy.entry(e.name).begin, e.begin) << e.name;  // the fixture is gap-free too
    EXPECT_TRUE(same_bytes(copy.tensor(e.name), src.tensor(e.name))) << e.name;
  }
}

TEST(SafetensorsWriter, ReplacesAtomicallyWhileOldViewsStayValid) {
  testing::TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, {{"w", Tensor::from_floats(std::vector<float>{1, 2, 3}, {3})}});
  const SafetensorsFile old_file = SafetensorsFile::open(path);
  const Tensor old_view = old_file.tensor("w");
  // Overwrite the file that is currently mapped, with a value computed from the mapping itself.
  const Tensor doubled =
      Tensor::from_floats(std::vector<float>{old_view.data<float>()[0] * 2, 4, 6, 8}, {4});
  write_safetensors(path, {{"w", doubled}, {"extra", old_view}});
  EXPECT_EQ(old_view.data<float>()[2], 3.0f);  // the old inode is untouched
  const SafetensorsFile new_file = SafetensorsFile::open(path);
  EXPECT_EQ(new_file.entry("w").shape, Shape({4}));
  EXPECT_EQ(new_file.tensor("w").data<float>()[0], 2.0f);
  EXPECT_EQ(new_file.tensor("extra").data<float>()[1], 2.0f);
  EXPECT_TRUE(leftovers(dir.path()).empty());
}

TEST(SafetensorsWriter, RejectsDuplicateAndReservedNamesWithoutTouchingTheTarget) {
  testing::TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  write_safetensors(path, {{"a", Tensor::from_floats(std::vector<float>{5}, {1})}});
  const std::string before = testing::read_bytes(path);
  const Tensor x = Tensor::zeros({2});
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_safetensors(path, {{"a", x}, {"b", x}, {"a", x}});
      },
      {path, "duplicate tensor name 'a'"}));
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_safetensors(path, {{"__metadata__", x}});
      },
      {path, "'__metadata__' is reserved"}));
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_safetensors(path, {{"u", Tensor()}});
      },
      {path, "tensor 'u' is undefined"}));
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_safetensors(path, {{"bad\xff", x}});
      },
      {path, "cannot encode the header"}));
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_safetensors(path, {{"a", x}}, {{"k", std::string("\xc3", 1)}});
      },
      {path, "cannot encode the header"}));
  EXPECT_EQ(testing::read_bytes(path), before);
  EXPECT_TRUE(leftovers(dir.path()).empty());
}

TEST(SafetensorsWriter, IoFailuresNameThePathAndLeaveNoTemporaryFile) {
  testing::TempDir dir;
  const Tensor x = Tensor::zeros({2});
  const std::string missing_dir = dir.file("no/such/dir/out.safetensors");
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_safetensors(missing_dir, {{"x", x}});
      },
      {missing_dir, "cannot create temporary file"}));
  // A non-empty directory in the way: everything is written, then the rename fails.
  const std::string blocked = dir.file("blocked.safetensors");
  fs::create_directories(blocked + "/inside");
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_safetensors(blocked, {{"x", x}});
      },
      {blocked, "cannot rename"}));
  EXPECT_TRUE(fs::is_directory(blocked));
  EXPECT_TRUE(leftovers(dir.path()).empty());
}

}  // namespace
}  // namespace vidax
