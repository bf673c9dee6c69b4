// Image decoding and resampling against what the official pipelines compute with PIL and torch
// (tests/data/wan_i2v: images decoded by PIL's Image.open().convert("RGB"), torch bicubic
// interpolation, PIL Lanczos), plus hostile files.
#include <fstream>

#include "core/error.h"
#include "io/image_reader.h"
#include "io/safetensors.h"
#include "nn/image_resize.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::all_close;

std::string data(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/wan_i2v/" + name;
}

TEST(ImageReader, DecodesLikePil) {
  const auto io = SafetensorsFile::open(data("images.io.safetensors"));
  for (const char* name : {"photo.png", "photo.jpg", "photo_444.jpg", "photo.webp", "gray.png",
                           "rgba.png", "palette.png"}) {
    SCOPED_TRACE(name);
    const RgbImage img = read_image(data(std::string("images/") + name));
    const Tensor ref = io.tensor(std::string(name) + ".rgb");  // [H, W, 3] U8
    ASSERT_EQ(img.height, ref.dim(0));
    ASSERT_EQ(img.width, ref.dim(1));
    int64_t off = 0, worst = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const int d = std::abs(int{img.rgb[static_cast<size_t>(i)]} - int{ref.data<uint8_t>()[i]});
      off += d != 0;
      worst = std::max<int64_t>(worst, d);
    }
    EXPECT_EQ(off, 0) << "pixels differing (worst " << worst << ")";
  }
}

TEST(ImageReader, RefusesBadFilesWithTheirName) {
  testing::TempDir dir;
  auto expect_error = [&](const std::string& path, const std::string& needle) {
    try {
      read_image(path);
      FAIL() << path << " was accepted";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(path), std::string::npos) << m;
      EXPECT_NE(m.find(needle), std::string::npos) << m;
    }
  };
  expect_error(dir.file("missing.png"), "cannot open");
  std::ofstream(dir.file("empty.png")).close();
  expect_error(dir.file("empty.png"), "empty");
  std::ofstream(dir.file("text.png")) << "hello, this is not an image";
  expect_error(dir.file("text.png"), "not a PNG, JPEG or WebP");
  // Truncated copies of every real image.
  for (const char* name : {"photo.png", "photo.jpg", "photo.webp"}) {
    std::ifstream in(data(std::string("images/") + name), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string cut = dir.file(std::string("cut_") + name);
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    EXPECT_THROW(read_image(cut), InputError) << name;
  }
}

TEST(ImageResize, BicubicMatchesTorchInterpolate) {
  const auto io = SafetensorsFile::open(data("resize.io.safetensors"));
  for (int k = 0; k < 5; ++k) {
    const std::string p = "bicubic" + std::to_string(k);
    const Tensor ref = io.tensor(p + ".out");
    const Tensor got = resize_bicubic(io.tensor(p + ".in"), ref.dim(1), ref.dim(2));
    // torch's CPU kernel rounds its source index and weights in f32 in an order this does not
    // reproduce bit for bit (nor did a numpy emulation): 2e-5 is the fixture README's bound.
    EXPECT_TRUE(all_close(got, ref, 2e-5, 1e-5, p));
    EXPECT_TRUE(all_close(resize_bicubic_reference(io.tensor(p + ".in"), ref.dim(1), ref.dim(2)),
                          ref, 1e-5, 1e-5, p + " reference"));
  }
}

TEST(ImageResize, LanczosMatchesPilExactly) {
  const auto io = SafetensorsFile::open(data("resize.io.safetensors"));
  for (int k = 0; k < 4; ++k) {
    const std::string p = "lanczos" + std::to_string(k);
    const Tensor in = io.tensor(p + ".in"), ref = io.tensor(p + ".out");
    const std::vector<uint8_t> got =
        resize_lanczos_rgb8({in.data<uint8_t>(), static_cast<size_t>(in.numel())}, in.dim(1),
                            in.dim(0), ref.dim(1), ref.dim(0));
    ASSERT_EQ(static_cast<int64_t>(got.size()), ref.numel());
    int64_t off = 0;
    for (int64_t i = 0; i < ref.numel(); ++i)
      off += got[static_cast<size_t>(i)] != ref.data<uint8_t>()[i];
    EXPECT_EQ(off, 0) << p;
  }
}

}  // namespace
}  // namespace vidax
