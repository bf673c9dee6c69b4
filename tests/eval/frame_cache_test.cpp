// The reference frame cache: keys depend on every field, entries round-trip, anything odd is a
// miss.
#include "eval/frame_cache.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax::eval {
namespace {

Tensor clip() {
  Tensor t = Tensor::zeros(Shape{3, 16, 20, 3}, DType::kU8);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(i * 7);
  return t;
}

TEST(FrameCache, KeyDependsOnEveryField) {
  const std::string k = clip_key("m", "c", "p", "n", 1);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, clip_key("m", "c", "p", "n", 1));
  const std::set<std::string> keys = {
      k, clip_key("m2", "c", "p", "n", 1), clip_key("m", "c2", "p", "n", 1),
      clip_key("m", "c", "p2", "n", 1), clip_key("m", "c", "p", "n2", 1),
      clip_key("m", "c", "p", "n", 2),
      // fields do not run into each other
      clip_key("m", "c", "pn", "", 1)};
  EXPECT_EQ(keys.size(), 7u);
}

TEST(FrameCache, StoresAndLoadsFrames) {
  vidax::testing::TempDir dir;
  const FrameCache cache(dir.file("sub/cache"));
  const Tensor t = clip();
  EXPECT_FALSE(cache.load("k", t.shape()));
  cache.store("k", t, {{"prompt", "a red square"}});
  const auto got = cache.load("k", t.shape());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->shape(), t.shape());
  EXPECT_EQ(0, std::memcmp(got->data<uint8_t>(), t.data<uint8_t>(), t.nbytes()));
  // A different expected shape is a miss, not an error.
  EXPECT_FALSE(cache.load("k", Shape{3, 16, 21, 3}));
}

TEST(FrameCache, DamagedEntriesAreMisses) {
  vidax::testing::TempDir dir;
  const FrameCache cache(dir.path());
  std::ofstream(dir.file("bad.safetensors")) << "not a safetensors file";
  EXPECT_FALSE(cache.load("bad", clip().shape()));
  cache.store("good", clip(), {});
  std::filesystem::resize_file(dir.file("good.safetensors"), 100);
  EXPECT_FALSE(cache.load("good", clip().shape()));
}

TEST(FrameCache, EmptyFolderDisablesTheCache) {
  const FrameCache cache("");
  EXPECT_FALSE(cache.enabled());
  cache.store("k", clip(), {});
  EXPECT_FALSE(cache.load("k", clip().shape()));
}

TEST(FrameCache, ModelFingerprintChangesWithTheFiles) {
  vidax::testing::TempDir dir;
  for (const char* name : {"dit", "t5", "vae", "tok"}) std::ofstream(dir.file(name)) << name;
  const ModelFiles files{
      dir.file("dit"), dir.file("t5"), dir.file("vae"), dir.file("tok"), "", "", 0, ""};
  const std::string a = model_fingerprint(files);
  EXPECT_EQ(a, model_fingerprint(files));
  std::ofstream(dir.file("vae")) << "other weights";
  EXPECT_NE(a, model_fingerprint(files));
}

}  // namespace
}  // namespace vidax::eval
