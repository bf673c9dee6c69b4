// VideoWriter output checked from outside: ffprobe for the stream parameters, libav's own
// decoders for the pixels (H.264/VP9 lossy but close; PNG exact), colour conversion against the
// BT.709 limited-range formula.
#include "io/video_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/temp_paths.h"
#include "io/video_test_util.h"
#include "support/test_support.h"

extern "C" {
#include <libavutil/pixfmt.h>
}

namespace vidax {
namespace {

using testing::decode_video;
using testing::DecodedFrame;
using testing::ffprobe_video;
using testing::list_dir;
using testing::smooth_frames;
using testing::TempDir;

constexpr int64_t kW = 64, kH = 48;
constexpr int64_t kChunks[] = {1, 4, 4};  // how the VAE hands frames over: 1, then 4 at a time
constexpr int64_t kFrames = 9;

// Writes the 9-frame test clip in chunks; returns the expected RGB bytes [9, H, W, 3].
std::vector<uint8_t> write_clip(const std::string& path, const VideoSpec& spec) {
  std::unique_ptr<VideoWriter> writer = VideoWriter::open(path, spec);
  std::vector<uint8_t> expected;
  int64_t at = 0;
  for (const int64_t n : kChunks) {
    const Tensor frames = smooth_frames(n, spec.height, spec.width, at);  // [3, n, H, W]
    writer->write(frames);
    const std::vector<uint8_t> bytes = to_uint8_rgb(frames);
    expected.insert(expected.end(), bytes.begin(), bytes.end());
    at += n;
    EXPECT_EQ(writer->frames_written(), at);
  }
  writer->finish();
  return expected;
}

VideoSpec spec_of(int64_t w, int64_t h, double fps = 16, int crf = -1) {
  VideoSpec spec;
  spec.width = w;
  spec.height = h;
  spec.fps = fps;
  spec.crf = crf;
  return spec;
}

void expect_stream(const std::string& path, const std::string& codec, const std::string& rate) {
  ASSERT_TRUE(testing::have_ffprobe()) << "ffprobe not found (scripts/setup installs ffmpeg)";
  auto probe = ffprobe_video(path);
  EXPECT_EQ(probe["error"], "");
  EXPECT_EQ(probe["codec_name"], codec);
  EXPECT_EQ(probe["pix_fmt"], "yuv420p");
  EXPECT_EQ(probe["width"], std::to_string(kW));
  EXPECT_EQ(probe["height"], std::to_string(kH));
  EXPECT_EQ(probe["nb_read_frames"], std::to_string(kFrames));
  EXPECT_EQ(probe["r_frame_rate"], rate);
  EXPECT_EQ(probe["avg_frame_rate"], rate);
  EXPECT_EQ(probe["color_space"], "bt709");
  EXPECT_EQ(probe["color_range"], "tv");
  EXPECT_EQ(probe["color_primaries"], "bt709");
  EXPECT_EQ(probe["color_transfer"], "bt709");
}

// BT.709, limited range, written out independently of swscale: Y = 16 + 219 E'y, C = 128 + 224 E'c.
constexpr double kKr = 0.2126, kKb = 0.0722, kKg = 1 - kKr - kKb;

double luma_of(const uint8_t* rgb) {
  return 16.0 + 219.0 * (kKr * rgb[0] + kKg * rgb[1] + kKb * rgb[2]) / 255.0;
}

// yuv420p frame → RGB with nearest chroma; per-channel values unclamped-then-clamped to [0,255].
std::vector<double> yuv_to_rgb(const DecodedFrame& f) {
  std::vector<double> rgb(static_cast<size_t>(f.width * f.height * 3));
  const int64_t cw = (f.width + 1) / 2;
  for (int64_t y = 0; y < f.height; ++y)
    for (int64_t x = 0; x < f.width; ++x) {
      const double ey = (f.planes[0][static_cast<size_t>(y * f.width + x)] - 16.0) / 219.0;
      const size_t ci = static_cast<size_t>((y / 2) * cw + x / 2);
      const double eb = (f.planes[1][ci] - 128.0) / 224.0;
      const double er = (f.planes[2][ci] - 128.0) / 224.0;
      const double r = ey + 2 * (1 - kKr) * er;
      const double b = ey + 2 * (1 - kKb) * eb;
      const double g = (ey - kKr * r - kKb * b) / kKg;
      const double c[3] = {r, g, b};
      for (int k = 0; k < 3; ++k)
        rgb[static_cast<size_t>((y * f.width + x) * 3 + k)] =
            std::min(255.0, std::max(0.0, 255.0 * c[k]));
    }
  return rgb;
}

// Decodes `path` and compares with the expected RGB: returns the mean and max abs error over all
// frames and channels (in 0..255 units).
void decoded_error(const std::string& path, const std::vector<uint8_t>& expected, double* mean,
                   double* max) {
  const std::vector<DecodedFrame> frames = decode_video(path);
  ASSERT_EQ(static_cast<int64_t>(frames.size()), kFrames);
  double sum = 0, worst = 0;
  const size_t frame_bytes = static_cast<size_t>(kW * kH * 3);
  for (size_t t = 0; t < frames.size(); ++t) {
    ASSERT_EQ(frames[t].format, AV_PIX_FMT_YUV420P);
    ASSERT_EQ(frames[t].width, kW);
    ASSERT_EQ(frames[t].height, kH);
    const std::vector<double> rgb = yuv_to_rgb(frames[t]);
    for (size_t i = 0; i < frame_bytes; ++i) {
      const double d = std::abs(rgb[i] - expected[t * frame_bytes + i]);
      sum += d;
      worst = std::max(worst, d);
    }
  }
  *mean = sum / static_cast<double>(expected.size());
  *max = worst;
}

TEST(VideoWriter, Mp4IsH264Yuv420pWithAllFramesAndBt709Tags) {
  TempDir dir;
  write_clip(dir.file("clip.mp4"), spec_of(kW, kH));
  expect_stream(dir.file("clip.mp4"), "h264", "16/1");
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"clip.mp4"});  // no temporary left
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

TEST(VideoWriter, WebmIsVp9Yuv420pWithAllFramesAndBt709Tags) {
  TempDir dir;
  write_clip(dir.file("clip.webm"), spec_of(kW, kH));
  expect_stream(dir.file("clip.webm"), "vp9", "16/1");
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"clip.webm"});
}

TEST(VideoWriter, FrameRateIsTheSpecs) {
  TempDir dir;
  write_clip(dir.file("clip.MP4"), spec_of(kW, kH, 24));  // Wan 2.2 TI2V rate; extension any case
  expect_stream(dir.file("clip.MP4"), "h264", "24/1");
}

TEST(VideoWriter, Mp4IndexComesFirst) {
  // +faststart: the moov box precedes mdat, so players can start before the download ends.
  TempDir dir;
  write_clip(dir.file("clip.mp4"), spec_of(kW, kH));
  std::ifstream in(dir.file("clip.mp4"), std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const size_t moov = bytes.find("moov"), mdat = bytes.find("mdat");
  ASSERT_NE(moov, std::string::npos);
  ASSERT_NE(mdat, std::string::npos);
  EXPECT_LT(moov, mdat);
}

// Lossy codecs at their default quality on smooth content: the decoded RGB is within a few
// levels of what was written. The floor is not the codec: this check upsamples chroma by
// nearest neighbour, so even the lossless (crf 0) file measures a mean abs error of 1.83 levels
// (max 9); at the default quality H.264 measures 2.66 (max 20), VP9 2.69 (max 27). Bounds: mean
// <= 3.5 levels, max <= 40. Matrix/range mistakes are caught exactly by the crf 0 test below.
TEST(VideoWriter, Mp4DecodesCloseToTheInput) {
  TempDir dir;
  const auto expected = write_clip(dir.file("clip.mp4"), spec_of(kW, kH));
  double mean = 0, max = 0;
  decoded_error(dir.file("clip.mp4"), expected, &mean, &max);
  EXPECT_LE(mean, 3.5) << "max " << max;
  EXPECT_LE(max, 40) << "mean " << mean;
}

TEST(VideoWriter, WebmDecodesCloseToTheInput) {
  TempDir dir;
  const auto expected = write_clip(dir.file("clip.webm"), spec_of(kW, kH));
  double mean = 0, max = 0;
  decoded_error(dir.file("clip.webm"), expected, &mean, &max);
  EXPECT_LE(mean, 3.5) << "max " << max;
  EXPECT_LE(max, 40) << "mean " << mean;
}

// crf 0 makes x264 lossless, so the decoded planes are exactly what swscale produced: luma must
// follow the BT.709 limited-range formula (Y in 16..235) within rounding, chroma must match the
// 2x2 average of the full-resolution chroma within a few levels (the resampling filter differs).
TEST(VideoWriter, ColourConversionIsBt709LimitedRange) {
  TempDir dir;
  const auto expected = write_clip(dir.file("clip.mp4"), spec_of(kW, kH, 16, 0));
  const std::vector<DecodedFrame> frames = decode_video(dir.file("clip.mp4"));
  ASSERT_EQ(static_cast<int64_t>(frames.size()), kFrames);
  const size_t frame_bytes = static_cast<size_t>(kW * kH * 3);
  double luma_max = 0, chroma_sum = 0;
  int64_t chroma_n = 0;
  for (size_t t = 0; t < frames.size(); ++t) {
    const uint8_t* rgb = expected.data() + t * frame_bytes;
    for (int64_t i = 0; i < kW * kH; ++i)
      luma_max = std::max(
          luma_max, std::abs(frames[t].planes[0][static_cast<size_t>(i)] - luma_of(rgb + 3 * i)));
    for (int64_t cy = 0; cy < kH / 2; ++cy)
      for (int64_t cx = 0; cx < kW / 2; ++cx) {
        double cb = 0, cr = 0;
        for (int64_t dy = 0; dy < 2; ++dy)
          for (int64_t dx = 0; dx < 2; ++dx) {
            const uint8_t* p = rgb + 3 * ((2 * cy + dy) * kW + 2 * cx + dx);
            const double ey = (luma_of(p) - 16.0) / 219.0;
            cb += (128.0 + 224.0 * (p[2] / 255.0 - ey) / (2 * (1 - kKb))) / 4;
            cr += (128.0 + 224.0 * (p[0] / 255.0 - ey) / (2 * (1 - kKr))) / 4;
          }
        const size_t ci = static_cast<size_t>(cy * (kW / 2) + cx);
        chroma_sum +=
            std::abs(frames[t].planes[1][ci] - cb) + std::abs(frames[t].planes[2][ci] - cr);
        chroma_n += 2;
      }
  }
  EXPECT_LE(luma_max, 1.0);
  EXPECT_LE(chroma_sum / static_cast<double>(chroma_n), 1.0);  // measured 0.26
}

TEST(VideoWriter, PngFolderHoldsExactFrames) {
  TempDir dir;
  for (const std::string name : {"frames/", "frames2"}) {  // trailing '/' or no extension
    const auto expected = write_clip(dir.file(name), spec_of(kW, kH));
    const std::string folder = dir.file(name);
    std::vector<std::string> want;
    for (int i = 0; i < kFrames; ++i) want.push_back("frame_0000" + std::to_string(i) + ".png");
    ASSERT_EQ(list_dir(folder), want);
    const size_t frame_bytes = static_cast<size_t>(kW * kH * 3);
    for (int i = 0; i < kFrames; ++i) {
      const auto decoded = decode_video(folder + "/" + want[static_cast<size_t>(i)]);
      ASSERT_EQ(decoded.size(), 1u);
      ASSERT_EQ(decoded[0].format, AV_PIX_FMT_RGB24);
      const std::vector<uint8_t> want_bytes(expected.begin() + i * frame_bytes,
                                            expected.begin() + (i + 1) * frame_bytes);
      EXPECT_EQ(decoded[0].planes[0], want_bytes) << want[static_cast<size_t>(i)];
    }
  }
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"frames", "frames2"}));
}

TEST(VideoWriter, PngFolderAcceptsOddSizesAndAnEmptyExistingFolder) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("out"));
  const auto expected = write_clip(dir.file("out"), spec_of(7, 5));
  const auto decoded = decode_video(dir.file("out/frame_00008.png"));
  ASSERT_EQ(decoded.size(), 1u);
  EXPECT_EQ(decoded[0].planes[0], std::vector<uint8_t>(expected.end() - 7 * 5 * 3, expected.end()));
}

}  // namespace
}  // namespace vidax
